package projector_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
)

func rebuild(tb testing.TB, b *testenv.Broker, s *projection.Store, cfg projector.RebuildConfig) (projector.RebuildStats, error) {
	tb.Helper()
	cfg.Brokers = b.Addrs
	if cfg.Partitions == 0 {
		cfg.Partitions = b.Topics.Partitions
	}
	return projector.Rebuild(context.Background(), cfg, s, nil)
}

func mustCompare(tb testing.TB, pg *testenv.Postgres, schema string) *projection.Diff {
	tb.Helper()
	d, err := projection.Compare(context.Background(), pg.Pool, schema, "public", "kv.changes", 10)
	if err != nil {
		tb.Fatalf("compare: %v", err)
	}
	return d
}

func TestRebuildEqualsLive(t *testing.T) {
	b, pg, live, prod := mustSetup(t, partitions)
	f := newFold(11, 8, 10) // puts, CAS, deletes, expires and re-creates

	produce(t, prod, f, 300, 20)
	prod.Abort(t, newEvent("tenant/t0/project/p/aborted", 1, events.KindPut, `1`))
	produce(t, prod, f, 300, 20)
	r := start(t, b, live, projector.Config{})
	testenv.WaitProjected(t, runTimeout, live, b.Topics.Changes, prod.Committed(t))
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	// The compacted topic keeps each key's latest event (no transaction
	// is open: see SERVICES.md on kfake's compaction).
	b.Cluster.Compact()

	st, err := rebuild(t, b, projection.New(pg.MustSchema(t, "rebuilt")), projector.RebuildConfig{MaxBatch: 7})
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if want := prod.Committed(t); !maps.Equal(st.Ends, want) {
		t.Errorf("rebuild read up to %v, want the last stable offsets %v", st.Ends, want)
	}
	if st.Events < int64(len(f.last)) || st.Events >= 600 {
		t.Errorf("rebuild read %d events; want at least one per key (%d) and fewer than produced (600): compaction", st.Events, len(f.last))
	}

	d := mustCompare(t, pg, "rebuilt")
	if !d.Equal() || d.NotCompared != 0 || d.Entries != int64(len(f.last)) || d.AgainstEntries != int64(len(f.last)) {
		t.Errorf("diff %+v; want equal, %d keys on both sides, all compared", d, len(f.last))
	}
	if !maps.Equal(d.Offsets, d.AgainstOffsets) {
		t.Errorf("rebuilt offsets %v, live %v", d.Offsets, d.AgainstOffsets)
	}
	if d.History >= d.AgainstHistory || d.HistoryMismatch != 0 {
		t.Errorf("history: rebuilt %d rows, live %d, mismatched %d; want fewer rebuilt rows, none mismatched",
			d.History, d.AgainstHistory, d.HistoryMismatch)
	}

	t.Run("FieldsEqual", func(t *testing.T) {
		// kv_fields (filtered scans) is not part of the diff: each schema
		// derives it from its own entries, so a rebuild has the same rows.
		const cols = `key, field, type, num, str, expires_at`
		var fields, differing int64
		if err := pg.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM public.kv_fields), (SELECT count(*) FROM (
			(SELECT `+cols+` FROM rebuilt.kv_fields EXCEPT SELECT `+cols+` FROM public.kv_fields) UNION ALL
			(SELECT `+cols+` FROM public.kv_fields EXCEPT SELECT `+cols+` FROM rebuilt.kv_fields)) d)`).Scan(&fields, &differing); err != nil {
			t.Fatal(err)
		}
		if fields == 0 || differing != 0 {
			t.Errorf("kv_fields: %d rows live, %d rows on one side only; want some, and none", fields, differing)
		}
	})
	t.Run("ThenTampered", func(t *testing.T) {
		var key string
		if err := pg.Pool.QueryRow(context.Background(), `UPDATE kv_entries SET value = '{"tampered":true}'
			WHERE key = (SELECT min(key) FROM kv_entries WHERE live) RETURNING key`).Scan(&key); err != nil {
			t.Fatal(err)
		}
		d := mustCompare(t, pg, "rebuilt")
		if d.Differing != 1 || len(d.Keys) != 1 || d.Keys[0].Key != key || !slices.Equal(d.Keys[0].Columns, []string{"value"}) {
			t.Errorf("diff after tampering %s: %+v", key, d)
		}
	})
}

func TestRebuildUpToEnds(t *testing.T) {
	b, pg, live, prod := mustSetup(t, partitions)
	f := newFold(12, 4, 5)
	stored := projectAndStop(t, b, live, prod, f, 100)
	produce(t, prod, f, 100, 10) // the live projection trails these

	st, err := rebuild(t, b, projection.New(pg.MustSchema(t, "rebuilt")), projector.RebuildConfig{Ends: stored})
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if !maps.Equal(st.Ends, stored) || st.Events != 100 {
		t.Errorf("rebuild read %d events up to %v, want 100 up to %v", st.Events, st.Ends, stored)
	}
	if d := mustCompare(t, pg, "rebuilt"); !d.Equal() || d.NotCompared != 0 {
		t.Errorf("diff %+v; want equal", d)
	}
}

func TestRebuildErrors(t *testing.T) {
	b, pg, _, prod := mustSetup(t, 1)
	const k = "tenant/t/project/p/k"
	prod.Commit(t, newEvent(k, 1, events.KindPut, `1`))

	t.Run("ErrEndPastTheLog", func(t *testing.T) {
		_, err := rebuild(t, b, projection.New(pg.MustSchema(t, "past")), projector.RebuildConfig{Ends: map[int32]int64{0: 1000}})
		if !errors.Is(err, changelog.ErrTopicReset) || !strings.Contains(err.Error(), "end 1000 is past the last stable offset 2") {
			t.Errorf("rebuild: %v, want ErrTopicReset naming the offsets", err)
		}
	})
	t.Run("ErrPoisonPill", func(t *testing.T) {
		prod.Txn(t, true, &kgo.Record{Topic: b.Topics.Changes, Partition: 0, Key: []byte(k), Value: []byte(`{not json`)})
		_, err := rebuild(t, b, projection.New(pg.MustSchema(t, "poison")), projector.RebuildConfig{})
		if err == nil || !strings.Contains(err.Error(), "poison pill") || !strings.Contains(err.Error(), "kv.changes/0@2") {
			t.Errorf("rebuild: %v, want a poison pill error naming kv.changes/0@2", err)
		}
	})
}
