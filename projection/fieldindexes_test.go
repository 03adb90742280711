package projection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// declareReady declares fields of scope ready in kv_field_indexes
// directly, as migration 00017 does: before any entry of the scope is
// applied, Apply then writes their rows from the start.
func declareReady(tb testing.TB, pool *pgxpool.Pool, scope string, fields ...string) {
	tb.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO kv_field_indexes (scope, field, partition, backfill_after)
		SELECT $1, f, 0, NULL FROM unnest($2::text[]) f ON CONFLICT (scope, field) DO UPDATE SET backfill_after = NULL`, scope, fields); err != nil {
		tb.Fatal(err)
	}
}

// declareFieldsOf declares ready in scope every field kv_value_fields
// finds in values.
func declareFieldsOf(tb testing.TB, pool *pgxpool.Pool, scope string, values ...string) {
	tb.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO kv_field_indexes (scope, field, partition, backfill_after)
		SELECT DISTINCT $1, f.field, 0, NULL::text FROM unnest($2::text[]) v CROSS JOIN LATERAL kv_value_fields(v::jsonb) f
		ON CONFLICT (scope, field) DO NOTHING`, scope, values); err != nil {
		tb.Fatal(err)
	}
}

// declareBuilt declares fields of scope building and runs Backfill, in
// steps of step keys, until nothing is left to build.
func declareBuilt(tb testing.TB, s *projection.Store, pool *pgxpool.Pool, step int, scope string, fields ...string) {
	tb.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO kv_field_indexes (scope, field, partition, backfill_after)
		SELECT $1, f, 0, '' FROM unnest($2::text[]) f ON CONFLICT (scope, field) DO NOTHING`, scope, fields); err != nil {
		tb.Fatal(err)
	}
	backfillAll(tb, s, step)
}

// backfillAll runs Backfill until nothing is left to build.
func backfillAll(tb testing.TB, s *projection.Store, step int) {
	tb.Helper()
	for range 10_000 {
		more, err := s.Backfill(context.Background(), []int32{0}, step)
		if err != nil {
			tb.Fatalf("backfill: %v", err)
		}
		if !more {
			return
		}
	}
	tb.Fatal("backfill does not end")
}

// undeclareAll drops every declaration (not the kv_fields rows).
func undeclareAll(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	if _, err := pool.Exec(context.Background(), `DELETE FROM kv_field_indexes`); err != nil {
		tb.Fatal(err)
	}
}

// scanAll follows a scan's cursors to its end and returns the keys and
// the number of pages.
func scanAll(tb testing.TB, s *projection.Store, prefix string, f projection.Filter, limit int, now time.Time) (keys []string, pages int) {
	tb.Helper()
	after := ""
	for pages < 100_000 {
		entries, next, err := s.Scan(context.Background(), prefix, f, projection.Page{After: after, Limit: limit, MaxBytes: noBudget, Now: now})
		if err != nil {
			tb.Fatalf("scan %s %+v: %v", prefix, f, err)
		}
		pages++
		if len(entries) > limit {
			tb.Fatalf("page of %d entries, limit %d", len(entries), limit)
		}
		for _, e := range entries {
			keys = append(keys, e.Key)
		}
		if next == "" {
			return keys, pages
		}
		if next <= after {
			tb.Fatalf("cursor %q does not move past %q", next, after)
		}
		after = next
	}
	tb.Fatal("scan does not end")
	return nil, 0
}

// TestApplyIndexesDeclaredFieldsOnly: Apply writes the kv_fields rows of
// the fields a scope declares, none of a scope that declares nothing, and
// its declaration's events keep kv_field_indexes: a put declares (new
// fields building), a later put drops what it no longer names, a delete
// drops all, an older event replayed changes nothing.
func TestApplyIndexesDeclaredFieldsOnly(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	const scope = "tenant/t/project/decl"
	decl := contract.FieldIndexesKey(scope)
	declared := func() []string {
		var out []string
		for _, fi := range mustFieldIndexes(t, s, scope) {
			out = append(out, fmt.Sprintf("%s:%v", fi.Field, fi.Ready))
		}
		return out
	}
	mustApply(t, s, "kv.changes", batchOf(0,
		put(t, scope+"/a", 1, `{"state":"new","n":1}`),
		put(t, "tenant/t/project/other/a", 1, `{"state":"new"}`)))
	if rows := storedFields(t, pool, "tenant/t/project/"); len(rows) != 0 {
		t.Fatalf("fields indexed with nothing declared: %v", rows)
	}
	// The declaration and a write in one batch: the write's declared
	// field is indexed at once, the field is building.
	mustApply(t, s, "kv.changes", batchOf(2,
		put(t, scope+"/b", 1, `{"state":"run","n":2}`),
		put(t, decl, 1, `{"fields":["state"]}`)))
	if got := declared(); !slices.Equal(got, []string{"state:false"}) {
		t.Fatalf("declared %v", got)
	}
	if rows := storedFields(t, pool, scope+"/b"); len(rows) != 1 || !strings.Contains(rows[0], ".state ") {
		t.Errorf("rows of b: %v", rows)
	}
	backfillAll(t, s, 1)
	if got := declared(); !slices.Equal(got, []string{"state:true"}) {
		t.Fatalf("after backfill: %v", got)
	}
	checkFieldsDerived(t, pool)

	mustApply(t, s, "kv.changes", batchOf(4, put(t, decl, 2, `{"fields":["n","state"]}`)))
	if got := declared(); !slices.Equal(got, []string{"n:false", "state:true"}) {
		t.Fatalf("declared %v", got)
	}
	mustApply(t, s, "kv.changes", batchOf(5, put(t, decl, 1, `{"fields":["zzz"]}`))) // a replay of an older one
	if got := declared(); !slices.Equal(got, []string{"n:false", "state:true"}) {
		t.Fatalf("after a replay: %v", got)
	}
	backfillAll(t, s, 1000)
	checkFieldsDerived(t, pool)
	mustApply(t, s, "kv.changes", batchOf(6, put(t, decl, 3, `{"fields":["n"]}`)))
	if got := declared(); !slices.Equal(got, []string{"n:true"}) {
		t.Fatalf("declared %v", got)
	}
	mustApply(t, s, "kv.changes", batchOf(7, event(t, contract.KindDelete, decl, 4, "")))
	if got := declared(); len(got) != 0 {
		t.Fatalf("after the declaration's delete: %v", got)
	}
}

func mustFieldIndexes(tb testing.TB, s *projection.Store, scope string) []projection.FieldIndex {
	tb.Helper()
	fi, err := s.FieldIndexes(context.Background(), scope)
	if err != nil {
		tb.Fatal(err)
	}
	return fi
}

// TestApplyNoticesDeclarationsOfAnotherStore: a Store that remembers a
// scope's declarations is told by its batch's check when another Store
// (another projector, after a rebalance) changed them, and writes the
// rows of the fields declared now.
func TestApplyNoticesDeclarationsOfAnotherStore(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	a, b := projection.New(pool), projection.New(pool)
	const scope = "tenant/t/project/two"
	mustApply(t, a, "kv.changes", batchOf(0, put(t, scope+"/x", 1, `{"state":"new"}`))) // a remembers: nothing declared
	mustApply(t, b, "kv.changes", batchOf(1, put(t, contract.FieldIndexesKey(scope), 1, `{"fields":["state"]}`)))
	mustApply(t, a, "kv.changes", batchOf(2, put(t, scope+"/y", 1, `{"state":"new"}`)))
	if rows := storedFields(t, pool, scope+"/y"); len(rows) != 1 {
		t.Errorf("rows of y written with what a remembered: %v", rows)
	}
}

// TestScanFallbackAgreesWithIndex: over a mixed data set (types, caps,
// expired and deleted entries, other scopes), every comparison scanned
// through the index (declared and ready), through the values (not
// declared, or building) and through the values with a budget so small
// that pages run short or empty, returns the same keys.
func TestScanFallbackAgreesWithIndex(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	now := t0.Add(24 * time.Hour)
	const scope = "tenant/t/project/mix"
	p := scope + "/"
	long := strings.Repeat("x", contract.MaxFieldStringBytes)
	values := []string{
		`{"state":"done","n":5}`, `{"state":"running","n":7.5}`, `{"state":"Running","n":"5"}`,
		`{"state":"é","n":1e1}`, `{"state":null,"n":-0}`, `{"state":true}`, `{"state":false,"n":9007199254740993}`,
		`{"state":"` + long + `"}`, `{"state":"` + long + `y"}`, `{"state":{"nested":1}}`, `["state"]`, `"done"`, `7`,
		`{"n":1e300}`, `{"n":2.50}`, `{"other":"done"}`,
	}
	var evs []contract.Event
	for i := range 600 {
		k := fmt.Sprintf("%sk%04d", p, i)
		v := values[i%len(values)]
		switch i % 7 {
		case 3:
			evs = append(evs, expiring(t, k, 1, v, now)) // expired at now
		case 5:
			evs = append(evs, expiring(t, k, 1, v, now.Add(time.Hour)))
		default:
			evs = append(evs, put(t, k, 1, v))
		}
		if i%11 == 0 {
			evs = append(evs, event(t, contract.KindDelete, k, 2, ""))
		}
	}
	evs = append(evs, put(t, "tenant/t/project/mix2/a", 1, `{"state":"done"}`), put(t, "tenant/t/project/mi/a", 1, `{"state":"done"}`))
	mustApply(t, s, "kv.changes", batchOf(0, evs...))

	filters := []projection.Filter{
		filter("state", contract.FilterEq, `"done"`), filter("state", contract.FilterNe, `"done"`),
		filter("state", contract.FilterLt, `"a"`), filter("state", contract.FilterGte, `"running"`),
		filter("state", contract.FilterEq, `null`), filter("state", contract.FilterEq, `true`),
		filter("state", contract.FilterEq, `"`+long+`"`), filter("n", contract.FilterLt, `6`),
		filter("n", contract.FilterGte, `1e1`), filter("n", contract.FilterEq, `0`), filter("n", contract.FilterNe, `2.5`),
		filter("n", contract.FilterEq, `"5"`), filter("other", contract.FilterEq, `"done"`),
	}
	scanEach := func(t *testing.T, limit int) map[string][]string {
		out := map[string][]string{}
		for _, f := range filters {
			for _, prefix := range []string{p, p + "k01", "tenant/t/project/mi"} {
				keys, _ := scanAll(t, s, prefix, f, limit, now)
				out[fmt.Sprintf("%s %s %s %s", prefix, f.Field, f.Op, f.Value)] = keys
			}
		}
		return out
	}
	fallback := scanEach(t, 7)
	declareBuilt(t, s, pool, 50, scope, "state")
	declareBuilt(t, s, pool, 50, "tenant/t/project/mix2", "state")
	if _, err := pool.Exec(context.Background(), `INSERT INTO kv_field_indexes VALUES ($1, 'n', 0, '')`, scope); err != nil {
		t.Fatal(err)
	}
	building := scanEach(t, 7) // state ready, n building: its scans read the values
	backfillAll(t, s, 50)
	checkFieldsDerived(t, pool)
	indexed := scanEach(t, 7)
	for name, want := range indexed {
		if len(want) == 0 && !strings.Contains(name, "k01") && !strings.Contains(name, "other") {
			t.Errorf("%s: matches nothing; the data set should exercise it", name)
		}
		if !slices.Equal(fallback[name], want) {
			t.Errorf("%s: fallback %v, index %v", name, fallback[name], want)
		}
		if !slices.Equal(building[name], want) {
			t.Errorf("%s: while building %v, index %v", name, building[name], want)
		}
	}
	undeclareAll(t, pool)
	if again := scanEach(t, 1000); !equalMaps(again, indexed) {
		t.Error("fallback with limit 1000 differs from the index")
	}
}

func equalMaps(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestScanFallbackPagesAreBounded: a scan without an index reads at most
// its budget of entries per page: a rare match far down the prefix comes
// after pages with none, each with a cursor, and the cursors lead to it.
func TestScanFallbackPagesAreBounded(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	const p = "tenant/t/project/sparse/"
	var evs []contract.Event
	for i := range 2500 {
		v := `{"state":"idle"}`
		if i == 2400 {
			v = `{"state":"rare"}`
		}
		evs = append(evs, put(t, fmt.Sprintf("%sk%05d", p, i), 1, v))
	}
	mustApply(t, s, "kv.changes", batchOf(0, evs...))
	f := filter("state", contract.FilterEq, `"rare"`)
	entries, next, err := s.Scan(context.Background(), p, f, projection.Page{Limit: 10, MaxBytes: noBudget, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 || next != fmt.Sprintf("%sk%05d", p, 999) {
		t.Fatalf("first page: %d entries, next %q; want none and the 1,000th key", len(entries), next)
	}
	keys, pages := scanAll(t, s, p, f, 10, t0)
	if !slices.Equal(keys, []string{p + "k02400"}) || pages != 3 {
		t.Errorf("got %v in %d pages, want the rare key in 3", keys, pages)
	}
	declareBuilt(t, s, pool, 700, "tenant/t/project/sparse", "state")
	keys, pages = scanAll(t, s, p, f, 10, t0)
	if !slices.Equal(keys, []string{p + "k02400"}) || pages != 1 {
		t.Errorf("indexed: got %v in %d pages, want the rare key in 1", keys, pages)
	}
}

// TestMigrationKeepsDeclaredFields: migration 00017 takes the
// declarations already written (live reserved keys whose value is a
// declaration) as ready, since the former projector indexed every field,
// and drops the kv_fields rows of every field no project declares.
func TestMigrationKeepsDeclaredFields(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	ctx := context.Background()
	p := migrator(t, pool)
	if _, err := p.DownTo(ctx, 16); err != nil {
		t.Fatalf("down to 16: %v", err)
	}
	// Entries and their kv_fields rows as the former projector left them:
	// every field of every value.
	if _, err := pool.Exec(ctx, `INSERT INTO kv_entries (key, scope, partition, version, live, value, updated_at, kafka_offset) VALUES
		('tenant/t/project/p/.eskv/field-indexes', 'tenant/t/project/p', 3, 1, true, '{"fields":["state"]}', now(), 0),
		('tenant/t/project/p/a', 'tenant/t/project/p', 3, 1, true, '{"state":"done","n":1}', now(), 1),
		('tenant/t/project/q/.eskv/field-indexes', 'tenant/t/project/q', 0, 1, true, '{"fields":["state"],"x":1}', now(), 2),
		('tenant/t/project/q/a', 'tenant/t/project/q', 0, 1, true, '{"state":"done"}', now(), 3),
		('tenant/t/project/r/.eskv/field-indexes', 'tenant/t/project/r', 0, 2, false, NULL, now(), 4),
		('tenant/t/project/r/a', 'tenant/t/project/r', 0, 1, true, '{"state":"done"}', now(), 5)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO kv_fields (key, field, type, num, str, expires_at)
		SELECT e.key, f.field, f.type, f.num, f.str, e.expires_at
		FROM kv_entries e CROSS JOIN LATERAL kv_value_fields(e.value::jsonb) f WHERE e.live`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	s := projection.New(pool)
	for scope, want := range map[string]string{"tenant/t/project/p": "state:true", "tenant/t/project/q": "", "tenant/t/project/r": ""} {
		var got []string
		for _, fi := range mustFieldIndexes(t, s, scope) {
			got = append(got, fmt.Sprintf("%s:%v", fi.Field, fi.Ready))
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s declares %v after the migration, want %q", scope, got, want)
		}
	}
	if rows := storedFields(t, pool, "tenant/t/project/"); len(rows) != 1 || !strings.HasPrefix(rows[0], "tenant/t/project/p/a.state ") {
		t.Errorf("kv_fields after the migration: %v; want p/a's state alone", rows)
	}
	checkFieldsDerived(t, pool)
}

// TestBackfillBesideApplies: a field's Backfill steps run while Apply
// creates and patches the scope's keys (as a projector runs them, side by
// side); once the field is ready its kv_fields rows are those of the
// keys' current values, every time. A step that read the keys before an
// Apply committed them and wrote their rows after it used to leave an old
// value's row behind: a scan through the index then missed a key whose
// patch had been applied.
func TestBackfillBesideApplies(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	ctx := context.Background()
	names := []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"}
	offset := int64(0)
	for round := range 150 {
		scope := fmt.Sprintf("tenant/t/project/beside-%d", round)
		if _, err := pool.Exec(ctx, `INSERT INTO kv_field_indexes (scope, field, partition, backfill_after) VALUES ($1, 'state', 0, '')`, scope); err != nil {
			t.Fatal(err)
		}
		var puts, patches []contract.Event
		for _, n := range names {
			puts = append(puts, put(t, scope+"/"+n, 1, `{"state":"todo"}`))
			patches = append(patches, put(t, scope+"/"+n, 2, `{"state":"done"}`))
		}
		built := make(chan error, 1)
		go func() {
			for {
				more, err := s.Backfill(ctx, []int32{0}, projection.BackfillStep)
				if err != nil || !more {
					built <- err
					return
				}
			}
		}()
		mustApply(t, s, "kv.changes", batchOf(offset, puts...))
		for i := range patches {
			mustApply(t, s, "kv.changes", batchOf(offset+int64(len(puts)+i), patches[i]))
		}
		offset += int64(len(puts) + len(patches))
		if err := <-built; err != nil {
			t.Fatalf("round %d: backfill: %v", round, err)
		}
		backfillAll(t, s, projection.BackfillStep)
		keys, _ := scanAll(t, s, scope+"/", projection.Filter{Field: "state", Op: contract.FilterEq, Value: json.RawMessage(`"done"`)}, 100, t0)
		want := make([]string, len(names))
		for i, n := range names {
			want[i] = scope + "/" + n
		}
		if !slices.Equal(keys, want) {
			checkFieldsDerived(t, pool)
			t.Fatalf("round %d: state = done lists %v, want all %d", round, keys, len(names))
		}
	}
}

// undeclaredRows returns how many kv_fields rows are of a field their
// scope does not declare.
func undeclaredRows(tb testing.TB, pool *pgxpool.Pool) int {
	tb.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM kv_fields f
		WHERE NOT EXISTS (SELECT FROM kv_field_indexes i WHERE i.scope = kv_key_scope(f.key) AND i.field = f.field)`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// TestDroppedFieldRowsAreCleared: the kv_fields rows of a field its
// project stops declaring go, Backfill step by step, and no other
// project's or field's; a field declared again while its rows are being
// cleared stops the clearing and is built again whole. (The rows used to
// stay, never read, until the field was declared again, or the key
// written: a project declaring and dropping fields in turn over the same
// keys kept a row per key for each.)
func TestDroppedFieldRowsAreCleared(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	const p, q = "tenant/t/project/drop", "tenant/t/project/keep"
	batch := []contract.Event{put(t, contract.FieldIndexesKey(p), 1, `{"fields":["a","b"]}`),
		put(t, contract.FieldIndexesKey(q), 1, `{"fields":["b"]}`)}
	for i := range 7 {
		batch = append(batch, put(t, fmt.Sprintf("%s/k%d", p, i), 1, fmt.Sprintf(`{"a":%d,"b":"x"}`, i)),
			put(t, fmt.Sprintf("%s/k%d", q, i), 1, fmt.Sprintf(`{"a":%d,"b":"y"}`, i)))
	}
	mustApply(t, s, "kv.changes", batchOf(0, batch...))
	backfillAll(t, s, 2)
	rows := func(scope string) int { return len(storedFields(t, pool, scope+"/")) }
	if rows(p) != 14 || rows(q) != 7 {
		t.Fatalf("rows once built: %d in %s, %d in %s; want 14 and 7", rows(p), p, rows(q), q)
	}

	mustApply(t, s, "kv.changes", batchOf(100, put(t, contract.FieldIndexesKey(p), 2, `{"fields":["a"]}`)))
	if n := undeclaredRows(t, pool); n != 7 {
		t.Fatalf("%d rows of undeclared fields after b's drop, want 7 (cleared by Backfill)", n)
	}
	backfillAll(t, s, 2)
	if n := undeclaredRows(t, pool); n != 0 || rows(p) != 7 || rows(q) != 7 {
		t.Errorf("after Backfill: %d rows of undeclared fields, %d in %s, %d in %s; want 0, 7 and 7", n, rows(p), p, rows(q), q)
	}
	checkFieldsDerived(t, pool)

	// b back, dropped again, one step of clearing, then back again.
	mustApply(t, s, "kv.changes", batchOf(101, put(t, contract.FieldIndexesKey(p), 3, `{"fields":["a","b"]}`)))
	backfillAll(t, s, 2)
	mustApply(t, s, "kv.changes", batchOf(102, put(t, contract.FieldIndexesKey(p), 4, `{"fields":["a"]}`)))
	if more, err := s.Backfill(context.Background(), []int32{0}, 2); err != nil || !more || undeclaredRows(t, pool) != 5 {
		t.Fatalf("one step of clearing: %v, %v, %d rows of undeclared fields left; want true, nil, 5", more, err, undeclaredRows(t, pool))
	}
	mustApply(t, s, "kv.changes", batchOf(103, put(t, contract.FieldIndexesKey(p), 5, `{"fields":["a","b"]}`)))
	backfillAll(t, s, 2)
	if rows(p) != 14 || undeclaredRows(t, pool) != 0 {
		t.Errorf("b declared again mid-clearing: %d rows in %s, want 14", rows(p), p)
	}
	for _, fi := range mustFieldIndexes(t, s, p) {
		if !fi.Ready {
			t.Errorf("%s not ready: %+v", fi.Field, fi)
		}
	}
	checkFieldsDerived(t, pool)
}

// TestMigrationFindsRowsLeftBehind: migration 00020 finds the kv_fields
// rows that earlier versions left behind for fields no longer declared,
// and Backfill then clears them.
func TestMigrationFindsRowsLeftBehind(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	ctx := context.Background()
	p := migrator(t, pool)
	if _, err := p.DownTo(ctx, 19); err != nil {
		t.Fatalf("down to 19: %v", err)
	}
	// p declares state (n was dropped); r's declaration was deleted.
	if _, err := pool.Exec(ctx, `INSERT INTO kv_entries (key, scope, partition, version, live, value, updated_at, kafka_offset) VALUES
		('tenant/t/project/p/.eskv/field-indexes', 'tenant/t/project/p', 0, 2, true, '{"fields":["state"]}', now(), 0),
		('tenant/t/project/p/a', 'tenant/t/project/p', 0, 1, true, '{"state":"done","n":1}', now(), 1),
		('tenant/t/project/p/b', 'tenant/t/project/p', 0, 1, true, '{"state":"done","n":2}', now(), 2),
		('tenant/t/project/r/.eskv/field-indexes', 'tenant/t/project/r', 0, 2, false, NULL, now(), 3),
		('tenant/t/project/r/a', 'tenant/t/project/r', 0, 1, true, '{"state":"done"}', now(), 4);
		INSERT INTO kv_field_indexes (scope, field, partition, backfill_after) VALUES ('tenant/t/project/p', 'state', 0, NULL);
		INSERT INTO kv_fields (key, field, type, num, str, expires_at)
		SELECT e.key, f.field, f.type, f.num, f.str, e.expires_at
		FROM kv_entries e CROSS JOIN LATERAL kv_value_fields(e.value::jsonb) f WHERE e.live AND e.key NOT LIKE '%/.eskv/%'`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	rows, err := pool.Query(ctx, `SELECT scope || ' ' || field || ' ' || partition || ' ' || cleared_to FROM kv_field_drops ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	drops, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tenant/t/project/p n 0 ", "tenant/t/project/r state 0 "}; !slices.Equal(drops, want) {
		t.Errorf("kv_field_drops after the migration: %q, want %q", drops, want)
	}
	backfillAll(t, projection.New(pool), 1)
	if n := undeclaredRows(t, pool); n != 0 {
		t.Errorf("%d rows of undeclared fields after Backfill, want 0", n)
	}
	if got := storedFields(t, pool, "tenant/t/project/"); len(got) != 2 {
		t.Errorf("kv_fields after Backfill: %v; want p's two state rows", got)
	}
}
