package projection_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

const topic = "kv.changes"

func TestCompare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const a, b, c = "tenant/t/project/p/a", "tenant/t/project/p/b", "tenant/t/project/p/c"
	// The log of partition 0: the live projection applies all of it, a
	// rebuild from the compacted topic sees each key's latest event.
	a1, a2 := put(t, a, 1, `1`), put(t, a, 2, `2`)
	b1, b2 := put(t, b, 1, `"x"`), event(t, contract.KindDelete, b, 2, "")
	c1 := put(t, c, 1, `{"c":true}`)
	log := batchOf(0, a1, b1, a2, b2, c1)
	compacted := []projection.Applied{log[2], log[3], log[4]}

	// setup returns a database whose public schema is the live
	// projection and schema "rebuilt" the rebuild.
	setup := func(t *testing.T) *testenv.Postgres {
		pg := testenv.MustPostgresDB(t)
		mustApply(t, projection.New(pg.Pool), topic, log)
		mustApply(t, projection.New(pg.MustSchema(t, "rebuilt")), topic, compacted)
		return pg
	}
	// exec is a setup that runs sqls on the database.
	exec := func(sqls ...string) func(*testing.T, *testenv.Postgres) {
		return func(t *testing.T, pg *testenv.Postgres) {
			t.Helper()
			for _, sql := range sqls {
				if _, err := pg.Pool.Exec(ctx, sql); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
		}
	}

	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, pg *testenv.Postgres) // after the live projection and the rebuild
		limit int
		check func(t *testing.T, d *projection.Diff)
	}{
		{"OKEqual", nil, 10, func(t *testing.T, d *projection.Diff) {
			want := &projection.Diff{
				Schema: "rebuilt", Against: "public",
				Entries: 3, AgainstEntries: 3,
				History: 3, AgainstHistory: 5,
				Offsets: map[int32]int64{0: 5}, AgainstOffsets: map[int32]int64{0: 5},
			}
			if !reflect.DeepEqual(d, want) || !d.Equal() {
				t.Errorf("diff:\n got %+v\nwant %+v", d, want)
			}
		}},
		{"TamperedValue", exec(`UPDATE kv_entries SET value = '3' WHERE key = '` + a + `'`), 10, func(t *testing.T, d *projection.Diff) {
			want := []projection.KeyDiff{{Key: a, InSchema: true, InAgainst: true, Version: 2, AgainstVersion: 2, Columns: []string{"value"}}}
			if d.Equal() || d.Differing != 1 || !reflect.DeepEqual(d.Keys, want) {
				t.Errorf("diff: differing %d, keys %+v; want %+v", d.Differing, d.Keys, want)
			}
		}},
		{"TamperedSeveralColumns", exec(`UPDATE kv_entries SET version = 9, semantics = '{"purpose":"lock"}', expires_at = now() WHERE key = '` + c + `'`), 10, func(t *testing.T, d *projection.Diff) {
			want := []projection.KeyDiff{{Key: c, InSchema: true, InAgainst: true, Version: 1, AgainstVersion: 9,
				Columns: []string{"version", "expires_at", "semantics"}}}
			if !reflect.DeepEqual(d.Keys, want) {
				t.Errorf("keys %+v, want %+v", d.Keys, want)
			}
		}},
		{"OneSided", exec(`DELETE FROM kv_entries WHERE key = '`+b+`'`, `DELETE FROM rebuilt.kv_entries WHERE key = '`+c+`'`), 1, func(t *testing.T, d *projection.Diff) {
			want := []projection.KeyDiff{{Key: b, InSchema: true, Version: 2}}
			if d.Differing != 2 || !reflect.DeepEqual(d.Keys, want) {
				t.Errorf("differing %d, keys %+v; want 2 and (limit 1) %+v", d.Differing, d.Keys, want)
			}
		}},
		// The live projector applied more of the log after the rebuild's
		// end: those keys are not compared.
		{"OKLiveAhead", func(t *testing.T, pg *testenv.Postgres) {
			mustApply(t, projection.New(pg.Pool), topic, batchOf(5, put(t, a, 3, `"new"`), put(t, "tenant/t/project/p/d", 1, `1`)))
		}, 10, func(t *testing.T, d *projection.Diff) {
			if !d.Equal() || d.NotCompared != 2 || d.HistoryMismatch != 0 {
				t.Errorf("diff %+v; want equal with 2 keys not compared", d)
			}
		}},
		{"HistoryMismatchIsInformation", exec(`DELETE FROM kv_history WHERE key = '` + a + `' AND version = 2`), 10, func(t *testing.T, d *projection.Diff) {
			if !d.Equal() || d.HistoryMismatch != 1 || d.AgainstHistory != 4 {
				t.Errorf("diff %+v; want equal entries, 1 history row missing", d)
			}
		}},
		{"RecreatedTopic", exec(
			`INSERT INTO public.projector_topic (topic, topic_id, partitions) VALUES ('kv.changes', 'old-id', 1)`,
			`INSERT INTO rebuilt.projector_topic (topic, topic_id, partitions) VALUES ('kv.changes', 'new-id', 1)`,
		), 10, func(t *testing.T, d *projection.Diff) {
			if d.Equal() || !d.TopicsDiffer() || d.Differing != 0 || d.TopicID != "new-id" || d.AgainstTopicID != "old-id" {
				t.Errorf("diff %+v; want not equal: folded from different topics", d)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := setup(t)
			if tc.setup != nil {
				tc.setup(t, pg)
			}
			d, err := projection.Compare(ctx, pg.Pool, projection.DiffSpec{Schema: "rebuilt", Against: "public", Topic: topic, Limit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, d)
		})
	}
	t.Run("ErrWrongTopic", func(t *testing.T) {
		pg := setup(t)
		if _, err := projection.Compare(ctx, pg.Pool, projection.DiffSpec{Schema: "rebuilt", Against: "public", Topic: "other", Limit: 10}); contract.ErrorCode(err) != contract.EInvalid {
			t.Errorf("Compare with a topic of no offsets = %v, want invalid", err)
		}
	})
	t.Run("ErrMissingSchema", func(t *testing.T) {
		pg := setup(t)
		if _, err := projection.Compare(ctx, pg.Pool, projection.DiffSpec{Schema: "nosuch", Against: "public", Topic: topic, Limit: 10}); err == nil {
			t.Errorf("Compare with a missing schema succeeded")
		}
	})
}
