package projection_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestDeferIndexes: on an empty projection the secondary indexes of
// kv_entries, kv_history and kv_fields are dropped and Apply leaves
// kv_fields alone; Restore brings back the same indexes and the kv_fields
// rows Apply would have written. A projection that holds entries is left
// as it is.
func TestDeferIndexes(t *testing.T) {
	t.Parallel()
	pg := testenv.MustPostgresDB(t)
	ctx := context.Background()
	// list returns the strings query (ORDER BY 1) selects of schema ($1).
	list := func(query, schema string) []string {
		rows, err := pg.Pool.Query(ctx, query, schema)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	indexes := func(schema string) []string {
		return list(`SELECT indexname FROM pg_indexes WHERE schemaname = $1 ORDER BY 1`, schema)
	}
	fields := func(schema string) int64 {
		var n int64
		if err := pg.Pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "kv_fields"}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	batch := batchOf(0, put(t, contract.FieldIndexesKey("tenant/t/project/p"), 1, `{"fields":["state","n","ok","x"]}`),
		put(t, "tenant/t/project/p/a", 1, `{"state":"done","n":1}`), put(t, "tenant/t/project/p/b", 1, `{"state":"failed"}`),
		put(t, "tenant/t/project/p/a", 2, `{"state":"running","n":2.50,"ok":true}`))
	migrated := indexes("public")
	mustApply(t, projection.New(pg.Pool), "kv.changes", batch)

	s := projection.New(pg.MustSchema(t, "bulk"))
	d, err := s.DeferIndexes(ctx)
	if err != nil || d == nil || len(d.Names) < 9 || slices.Contains(indexes("bulk"), "kv_fields_str_scoped") || slices.Contains(indexes("bulk"), "kv_fields_pkey") {
		t.Fatalf("DeferIndexes: %v, %v; left %v", d, err, indexes("bulk"))
	}
	mustApply(t, s, "kv.changes", batch)
	if n := fields("bulk"); n != 0 {
		t.Errorf("kv_fields has %d rows while deferred, want 0", n)
	}
	if err := d.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if got := indexes("bulk"); !slices.Equal(got, migrated) {
		t.Errorf("indexes after Restore %v, want %v", got, migrated)
	}
	constraints := func(schema string) []string {
		return list(`SELECT c.conname || ' ' || pg_get_constraintdef(c.oid) FROM pg_constraint c
JOIN pg_class t ON t.oid = c.conrelid WHERE t.relnamespace = $1::regnamespace ORDER BY 1`, schema)
	}
	if got, want := constraints("bulk"), constraints("public"); !slices.Equal(got, want) || !slices.Contains(got, "kv_fields_pkey PRIMARY KEY (field, key) INCLUDE (type, num, str, expires_at)") {
		t.Errorf("constraints after Restore %q, want %q with kv_fields' primary key", got, want)
	}
	const cols = `key, field, type, num, str, expires_at`
	var differing int64
	if err := pg.Pool.QueryRow(ctx, `SELECT count(*) FROM ((SELECT `+cols+` FROM bulk.kv_fields EXCEPT SELECT `+cols+` FROM public.kv_fields)
		UNION ALL (SELECT `+cols+` FROM public.kv_fields EXCEPT SELECT `+cols+` FROM bulk.kv_fields)) d`).Scan(&differing); err != nil {
		t.Fatal(err)
	}
	if n := fields("public"); n != 4 || differing != 0 {
		t.Errorf("kv_fields: %d rows applied, %d differing from the restored ones; want 4 and 0", n, differing)
	}
	mustApply(t, s, "kv.changes", batchOf(4, put(t, "tenant/t/project/p/c", 1, `{"x":1}`)))
	if fi, err := s.FieldIndexes(ctx, "tenant/t/project/p"); err != nil || len(fi) != 4 || !fi[0].Ready || !fi[3].Ready {
		t.Errorf("declarations after Restore: %+v, %v; want 4, ready", fi, err)
	}
	if n := fields("bulk"); n != 5 {
		t.Errorf("kv_fields after Restore and one more put: %d rows, want 5 (Apply writes it again)", n)
	}
	if d, err := s.DeferIndexes(ctx); err != nil || d != nil || !slices.Equal(indexes("bulk"), migrated) {
		t.Errorf("DeferIndexes of a projection holding entries: %v, %v; want nil, nothing dropped", d, err)
	}
}

// TestRestoreDerivesFieldsInKeyOrder: Restore writes kv_fields' rows in
// the order of its primary key, (field, key), so that the key's build
// finds them sorted, in passes of a few fields each; the rows are those
// Apply writes, the ones of a number only Postgres can cap (an
// exponent: derived by kv_value_fields) included.
func TestRestoreDerivesFieldsInKeyOrder(t *testing.T) {
	t.Parallel()
	pg := testenv.MustPostgresDB(t)
	ctx := context.Background()
	batch := []contract.Event{
		put(t, contract.FieldIndexesKey("tenant/t/project/p"), 1, `{"fields":["state","n","ok"]}`),
		put(t, contract.FieldIndexesKey("tenant/t/project/q"), 1, `{"fields":["n","x"]}`),
	}
	for i := range 30 {
		batch = append(batch,
			put(t, fmt.Sprintf("tenant/t/project/p/%02d", 29-i), 1, fmt.Sprintf(`{"state":"s%d","n":%d,"ok":%t,"x":1}`, i%3, i, i%2 == 0)),
			put(t, fmt.Sprintf("tenant/t/project/q/%02d", i), 1, fmt.Sprintf(`{"n":%d,"x":"v%d","state":"no"}`, i, i)))
	}
	batch = append(batch, put(t, "tenant/t/project/q/exp", 1, `{"n":1e3,"x":true}`))
	mustApply(t, projection.New(pg.Pool), "kv.changes", batchOf(0, batch...))

	s := projection.New(pg.MustSchema(t, "bulk"))
	d, err := s.DeferIndexes(ctx)
	if err != nil || d == nil {
		t.Fatalf("DeferIndexes: %v, %v", d, err)
	}
	d.SetStreams(2) // three passes: n and ok, state and x
	mustApply(t, s, "kv.changes", batchOf(0, batch...))
	if err := d.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	const cols = `key, field, type, num, str, expires_at`
	var applied, differing int64
	if err := pg.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM public.kv_fields), (SELECT count(*) FROM ((SELECT `+cols+` FROM bulk.kv_fields EXCEPT SELECT `+cols+` FROM public.kv_fields)
		UNION ALL (SELECT `+cols+` FROM public.kv_fields EXCEPT SELECT `+cols+` FROM bulk.kv_fields)) d)`).Scan(&applied, &differing); err != nil {
		t.Fatal(err)
	}
	// p: 30 keys of 3 fields; q: 30 of 2, and exp's 2.
	if applied != 152 || differing != 0 {
		t.Errorf("kv_fields: %d rows applied, %d differing from the restored ones; want 152 and 0", applied, differing)
	}
	rows, err := pg.Pool.Query(ctx, `SELECT field || ' ' || key FROM bulk.kv_fields WHERE key <> 'tenant/t/project/q/exp' ORDER BY ctid`)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 150 || !slices.IsSorted(stored) {
		t.Errorf("kv_fields' rows in the order they are stored (%d): %v; want 150 in (field, key) order", len(stored), stored)
	}
}
