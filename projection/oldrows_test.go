package projection_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestHistoryRowsOfEitherFormat: kv_history rows of both formats, each
// written by Apply, read through every reader, alone and mixed on one
// key. The HistoryJSONB rows (the event as jsonb in event, no
// request_id) come first: written on a projection migrated up to 00010,
// as the former release wrote them (FormerRelease), or on one migrated
// past 00011, as this release writes them by default (Default); the
// HistoryText rows (the event's text in event_text, request_id) after
// them. The readers: History and its pages, the requestId lookup (older
// uses, a newer use of the same id in the other format, an older pop's
// element), VersionOffset, PruneHistory, Compare against a projection of
// text rows only, and logcheck's lookup of acknowledged writes. The
// former release's own reads find the jsonb rows and not the text ones,
// which is why jsonb is the default.
func TestHistoryRowsOfEitherFormat(t *testing.T) {
	t.Parallel()
	t.Run("FormerRelease", func(t *testing.T) { historyRowsOfEitherFormat(t, false) })
	t.Run("Default", func(t *testing.T) { historyRowsOfEitherFormat(t, true) })
}

// historyRowsOfEitherFormat is TestHistoryRowsOfEitherFormat, its jsonb
// rows written after every migration when migrated.
func historyRowsOfEitherFormat(t *testing.T, migrated bool) {
	ctx := context.Background()
	pg := testenv.MustPostgresDB(t)
	if _, err := projection.CreateSchema(ctx, pg.Pool, "upgraded", false); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := projection.InSchema(cfg, "upgraded"); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	// Key a: versions 1-3 written as jsonb, 4-5 as text; the list l: two
	// pushes and a pop as jsonb, a push as text.
	const a = "tenant/t/project/p/a"
	a1, a2, a3 := put(t, a, 1, `{"n":1}`), put(t, a, 2, `{"n":2}`), put(t, a, 3, `{"n":3}`)
	a3.RequestID, a3.RequestDigest = "req-1", "digest-again" // req-1 again, newest use in the jsonb rows
	a4, a5 := put(t, a, 4, `{"n":4}`), put(t, a, 5, `{"n":5}`)
	a5.RequestID, a5.RequestDigest = "req-2", "digest-2-again" // req-2 again, newer than the jsonb row's
	m := &listModel{tb: t, key: "tenant/t/project/p/jobs"}
	push1, push2, pop := m.rpush(`"a"`), m.rpush(`{"job":"b"}`), m.lpop()
	pop.RequestID, pop.RequestDigest = "pop-1", "pop-digest"
	push3 := m.rpush(`"c"`)
	before := batchOf(0, a1, a2, a3, push1, push2, pop)
	after := batchOf(int64(len(before)), a4, a5, push3)

	s := projection.New(pool)
	s.SetHistoryFormat(projection.HistoryJSONB)
	if !migrated {
		if err := projection.MigrateTo(ctx, pool, 10); err != nil {
			t.Fatal(err)
		}
		mustApply(t, s, topic, before)
	}
	if err := projection.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if migrated {
		mustApply(t, s, topic, before)
	}
	text := projection.New(pool)
	text.SetHistoryFormat(projection.HistoryText)
	mustApply(t, text, topic, after)

	var jsonbRows, textRows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE event IS NOT NULL AND event_text IS NULL AND request_id IS NULL),
		count(*) FILTER (WHERE event IS NULL AND event_text IS NOT NULL) FROM kv_history`).Scan(&jsonbRows, &textRows); err != nil {
		t.Fatal(err)
	}
	if jsonbRows != len(before) || textRows != len(after) {
		t.Fatalf("%d jsonb and %d text rows, want %d and %d", jsonbRows, textRows, len(before), len(after))
	}

	t.Run("FormerReleaseReads", func(t *testing.T) {
		// The former release's requestId lookup (requestsSQL before
		// migration 00011) finds the jsonb rows' requestIds and misses
		// the text rows' (req-2's newer use, req-4), and its History
		// (historySQL) reads no event from a text row.
		rows, err := pool.Query(ctx, formerRequestsSQL, []string{a, a, a, m.key}, []string{"req-1", "req-2", "req-4", "pop-1"})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		var key, rid string
		var version int64
		if _, err := pgx.ForEachRow(rows, []any{&key, &rid, &version}, func() error {
			got[key+" "+rid] = version
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{a + " req-1": 3, a + " req-2": 2, m.key + " pop-1": 3}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("the former lookup finds %v, want %v", got, want)
		}
		var read []int64
		if err := pool.QueryRow(ctx, `SELECT array_agg(version ORDER BY version) FROM kv_history
			WHERE key = $1 AND (event - 'before')::text IS NOT NULL`, a).Scan(&read); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(read, []int64{1, 2, 3}) {
			t.Errorf("the former History reads the events of versions %v, want [1 2 3]", read)
		}
	})

	t.Run("History", func(t *testing.T) {
		want := []contract.HistoryVersion{}
		for _, e := range []contract.Event{a1, a2, a3, a4, a5} {
			want = append(want, projection.HistoryVersionOf(&e))
		}
		got, next, err := s.History(ctx, a, 1, 10, 1<<20)
		if err != nil || next != 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("history: next %d, %v\n got %+v\nwant %+v", next, err, got, want)
		}
		// Pages of two: the second spans both formats.
		var paged []contract.HistoryVersion
		for from := int64(1); from != 0; {
			page, n, err := s.History(ctx, a, from, 2, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			paged, from = append(paged, page...), n
		}
		if !reflect.DeepEqual(paged, want) {
			t.Fatalf("paged history:\n got %+v\nwant %+v", paged, want)
		}
	})

	t.Run("Requests", func(t *testing.T) {
		ref := func(k, id string) projection.RequestRef { return projection.RequestRef{Key: k, RequestID: id} }
		_, got, err := s.StatesAndRequests(ctx, nil, []projection.RequestRef{
			ref(a, "req-1"), ref(a, "req-2"), ref(a, "req-4"), ref(a, "req-9"), ref(m.key, "pop-1")})
		if err != nil {
			t.Fatal(err)
		}
		popped := got[ref(m.key, "pop-1")]
		delete(got, ref(m.key, "pop-1"))
		want := map[projection.RequestRef]projection.AppliedRequest{
			ref(a, "req-1"): {Version: 3, Digest: "digest-again"},   // jsonb rows only
			ref(a, "req-2"): {Version: 5, Digest: "digest-2-again"}, // a text row, newer than the jsonb one
			ref(a, "req-4"): {Version: 4, Digest: "digest-4"},       // text rows only
		}
		for r, a := range got {
			if a.At.IsZero() {
				t.Errorf("%v: no time (the event's ts)", r)
			}
		}
		if got := withoutAt(got); !reflect.DeepEqual(got, want) {
			t.Errorf("applied requests:\n got %+v\nwant %+v", got, want)
		}
		var meta contract.CollectionMeta
		if popped.Version != 3 || popped.Digest != "pop-digest" || popped.Popped == nil || string(popped.Popped.Value) != `"a"` ||
			json.Unmarshal(popped.After, &meta) != nil || meta.Size != 1 {
			t.Errorf("older pop in a jsonb row: %+v (popped %+v, after %s)", popped, popped.Popped, popped.After)
		}
	})

	t.Run("VersionOffset", func(t *testing.T) {
		for v, want := range map[int64]int64{2: 1, 4: int64(len(before))} {
			if got, err := s.VersionOffset(ctx, topic, 0, a, v); err != nil || got != want {
				t.Errorf("version %d: offset %d, %v; want %d", v, got, err, want)
			}
		}
	})

	t.Run("CompareWithNewRows", func(t *testing.T) {
		// The same log applied as text: every row in the other format
		// than the jsonb ones.
		fresh := projection.New(pg.MustSchema(t, "fresh"))
		fresh.SetHistoryFormat(projection.HistoryText)
		mustApply(t, fresh, topic, append(append([]projection.Applied{}, before...), after...))
		d, err := projection.Compare(ctx, pg.Pool, projection.DiffSpec{Schema: "upgraded", Against: "fresh", Topic: topic, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Equal() || d.History != 9 || d.AgainstHistory != 9 || d.HistoryMismatch != 0 {
			t.Errorf("diff %+v, want equal with 9 matching history rows", d)
		}
		// A changed jsonb row is told apart.
		if _, err := pool.Exec(ctx, `UPDATE kv_history SET event = jsonb_set(event, '{after}', '7') WHERE key = $1 AND version = 2`, a); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := pool.Exec(ctx, `UPDATE kv_history SET event = jsonb_set(event, '{after}', '{"n":2}') WHERE key = $1 AND version = 2`, a); err != nil {
				t.Error(err)
			}
		})
		if d, err := projection.Compare(ctx, pg.Pool, projection.DiffSpec{Schema: "upgraded", Against: "fresh", Topic: topic, Limit: 10}); err != nil || d.HistoryMismatch != 1 {
			t.Errorf("diff %+v, %v; want 1 history mismatch", d, err)
		}
	})

	t.Run("Logcheck", func(t *testing.T) {
		var evs []logcheck.Event
		var acks []logcheck.Acked
		for _, ap := range append(append([]projection.Applied{}, before...), after...) {
			evs = append(evs, logcheck.Event{Partition: ap.Partition, Offset: ap.Offset, Event: ap.Event})
			acks = append(acks, logcheck.Acked{Key: ap.Event.Key, Version: ap.Event.Version, Value: ap.Event.After})
		}
		f, err := logcheck.Projection(ctx, pool, &logcheck.Log{Events: evs}, acks)
		if err != nil || len(f.LostInProjection) != 0 {
			t.Errorf("lost in projection: %v, %v", f.LostInProjection, err)
		}
	})

	t.Run("PruneHistory", func(t *testing.T) {
		// Keep each key's newest 2 versions: a loses its 3 jsonb rows,
		// the list the jsonb rows of its pushes (the pop's stays).
		n, err := s.PruneHistory(ctx, projection.Retention{MaxVersions: 2}, time.Now(), projection.PruneBatch{Keys: 10, Rows: 100})
		if err != nil || n != 5 {
			t.Fatalf("pruned %d, %v; want 5", n, err)
		}
		if got := historyVersions(t, pool, a); !reflect.DeepEqual(got, []int64{4, 5}) {
			t.Errorf("a keeps %v, want [4 5]", got)
		}
		if got := historyVersions(t, pool, m.key); !reflect.DeepEqual(got, []int64{3, 4}) {
			t.Errorf("the list keeps %v, want [3 4]", got)
		}
	})
}

// formerRequestsSQL is the requestId lookup of the releases before
// migration 00011: event only, through kv_history_request_id.
const formerRequestsSQL = `SELECT t.k, t.rid, h.version
FROM unnest($1::text[], $2::text[]) AS t(k, rid)
CROSS JOIN LATERAL (
    SELECT version, event FROM kv_history
    WHERE key = t.k AND event ? 'requestId' AND event->>'requestId' = t.rid
    ORDER BY version DESC
    LIMIT 1
) h`
