package projection_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestHistoryRowsOfEitherFormat: kv_history rows written before
// migration 00011 (the event as jsonb in event, no request_id) read
// through every reader as the rows written since (the event's text in
// event_text, request_id), alone and mixed on one key: History and its
// pages, the requestId lookup (older uses, a newer use of the same id
// in the other format, an older pop's element), VersionOffset,
// PruneHistory, Compare against a projection of new rows only, and
// logcheck's lookup of acknowledged writes.
func TestHistoryRowsOfEitherFormat(t *testing.T) {
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

	// Key a: versions 1-3 written by the former release, 4-5 since; the
	// list l: two pushes and a pop by the former release, a push since.
	const a = "tenant/t/project/p/a"
	a1, a2, a3 := put(t, a, 1, `{"n":1}`), put(t, a, 2, `{"n":2}`), put(t, a, 3, `{"n":3}`)
	a3.RequestID, a3.RequestDigest = "req-1", "digest-again" // req-1 again, newest use in the old rows
	a4, a5 := put(t, a, 4, `{"n":4}`), put(t, a, 5, `{"n":5}`)
	a5.RequestID, a5.RequestDigest = "req-2", "digest-2-again" // req-2 again, newer than the old row's
	m := &listModel{tb: t, key: "tenant/t/project/p/jobs"}
	push1, push2, pop := m.rpush(`"a"`), m.rpush(`{"job":"b"}`), m.lpop()
	pop.RequestID, pop.RequestDigest = "pop-1", "pop-digest"
	push3 := m.rpush(`"c"`)
	before := batchOf(0, a1, a2, a3, push1, push2, pop)
	after := batchOf(int64(len(before)), a4, a5, push3)

	if err := projection.MigrateTo(ctx, pool, 10); err != nil {
		t.Fatal(err)
	}
	if err := projection.ApplyFormer(ctx, pool, topic, before); err != nil {
		t.Fatal(err)
	}
	if err := projection.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	s := projection.New(pool)
	mustApply(t, s, topic, after)

	var old, text int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE event IS NOT NULL AND event_text IS NULL AND request_id IS NULL),
		count(*) FILTER (WHERE event IS NULL AND event_text IS NOT NULL) FROM kv_history`).Scan(&old, &text); err != nil {
		t.Fatal(err)
	}
	if old != len(before) || text != len(after) {
		t.Fatalf("%d old-format and %d new-format rows, want %d and %d", old, text, len(before), len(after))
	}

	t.Run("History", func(t *testing.T) {
		want := []events.HistoryVersion{}
		for _, e := range []events.Event{a1, a2, a3, a4, a5} {
			want = append(want, events.HistoryVersionOf(&e))
		}
		got, next, err := s.History(ctx, a, 1, 10, 1<<20)
		if err != nil || next != 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("history: next %d, %v\n got %+v\nwant %+v", next, err, got, want)
		}
		// Pages of two: the second spans both formats.
		var paged []events.HistoryVersion
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
			ref(a, "req-1"): {Version: 3, Digest: "digest-again"},   // old rows only
			ref(a, "req-2"): {Version: 5, Digest: "digest-2-again"}, // a new row, newer than the old one
			ref(a, "req-4"): {Version: 4, Digest: "digest-4"},       // new rows only
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("applied requests:\n got %+v\nwant %+v", got, want)
		}
		var meta events.CollectionMeta
		if popped.Version != 3 || popped.Digest != "pop-digest" || popped.Popped == nil || string(popped.Popped.Value) != `"a"` ||
			json.Unmarshal(popped.After, &meta) != nil || meta.Size != 1 {
			t.Errorf("older pop in an old row: %+v (popped %+v, after %s)", popped, popped.Popped, popped.After)
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
		// The same log applied by this release: every row new-format.
		mustApply(t, projection.New(pg.MustSchema(t, "fresh")), topic, append(append([]projection.Applied{}, before...), after...))
		d, err := projection.Compare(ctx, pg.Pool, "upgraded", "fresh", topic, 10)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Equal() || d.History != 9 || d.AgainstHistory != 9 || d.HistoryMismatch != 0 {
			t.Errorf("diff %+v, want equal with 9 matching history rows", d)
		}
		// A changed old row is told apart.
		if _, err := pool.Exec(ctx, `UPDATE kv_history SET event = jsonb_set(event, '{after}', '7') WHERE key = $1 AND version = 2`, a); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := pool.Exec(ctx, `UPDATE kv_history SET event = jsonb_set(event, '{after}', '{"n":2}') WHERE key = $1 AND version = 2`, a); err != nil {
				t.Error(err)
			}
		})
		if d, err := projection.Compare(ctx, pg.Pool, "upgraded", "fresh", topic, 10); err != nil || d.HistoryMismatch != 1 {
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
		f, err := logcheck.Projection(ctx, pool, evs, acks)
		if err != nil || len(f.LostInProjection) != 0 {
			t.Errorf("lost in projection: %v, %v", f.LostInProjection, err)
		}
	})

	t.Run("PruneHistory", func(t *testing.T) {
		// Keep each key's newest 2 versions: a loses its 3 old rows, the
		// list the old rows of its pushes (the pop's old row stays).
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
