package projection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// setEvent is the event of an sadd (add) or srem of member on the set
// key at version, with the set's metadata after it.
func setEvent(tb testing.TB, key string, version int64, op, member string, size, since int64) contract.Event {
	tb.Helper()
	e := put(tb, key, version, fmt.Sprintf(`{"type":"set","size":%d,"since":%d}`, size, since))
	e.Op, e.Semantics = contract.OpSAdd, contract.Semantics{Purpose: "set"}
	if op == contract.ElementRemove {
		e.Op = contract.OpSRem
	}
	e.Element = &contract.Element{Op: op, Member: member}
	return e
}

func mustMembers(tb testing.TB, s *projection.Store, key string) []string {
	tb.Helper()
	var all []string
	cursor := ""
	for {
		page, next, err := s.Members(context.Background(), key, cursor, 2, t0)
		if err != nil {
			tb.Fatal(err)
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

// TestApplyElements: element changes apply all, in event order, within a
// batch and across batches; a replayed batch changes nothing; a deleted
// set's rows are not members of the next set of the key; members of any
// content page in byte order.
func TestApplyElements(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	const add, rem = contract.ElementAdd, contract.ElementRemove

	t.Run("OKOrderWithinABatch", func(t *testing.T) {
		k := "tenant/t/project/p/order"
		b := batchOf(0,
			setEvent(t, k, 1, add, "a", 1, 1),
			setEvent(t, k, 2, add, "b", 2, 1),
			setEvent(t, k, 3, rem, "a", 1, 1),
			setEvent(t, k, 4, add, "c", 2, 1),
			setEvent(t, k, 5, rem, "c", 1, 1),
			setEvent(t, k, 6, add, "c", 2, 1),
			setEvent(t, k, 7, rem, "b", 1, 1))
		mustApply(t, s, "kv.order", b)
		if got := mustMembers(t, s, k); !slices.Equal(got, []string{"c"}) {
			t.Fatalf("members %q, want [c]", got)
		}
	})

	t.Run("OKReplayChangesNothing", func(t *testing.T) {
		k := "tenant/t/project/p/replay"
		first := batchOf(0, setEvent(t, k, 1, add, "a", 1, 1), setEvent(t, k, 2, add, "b", 2, 1))
		second := batchOf(2, setEvent(t, k, 3, rem, "a", 1, 1))
		mustApply(t, s, "kv.replay", first)
		mustApply(t, s, "kv.replay", second)
		mustApply(t, s, "kv.replay", first) // a replay must not bring a back
		mustApply(t, s, "kv.replay", second)
		if got := mustMembers(t, s, k); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("members %q, want [b]", got)
		}
		if v, err := s.Element(context.Background(), projection.ElementRef{Collection: k, Member: "b"}); err != nil || v != 2 {
			t.Fatalf("element b: version %d %v, want 2", v, err)
		}
	})

	t.Run("OKDeletedSetLeavesNoMembers", func(t *testing.T) {
		k := "tenant/t/project/p/recreated"
		del := event(t, contract.KindDelete, k, 3, "")
		mustApply(t, s, "kv.recreate", batchOf(0,
			setEvent(t, k, 1, add, "old", 1, 1), setEvent(t, k, 2, add, "kept", 2, 1), del))
		if got := mustMembers(t, s, k); len(got) != 0 {
			t.Fatalf("members of a deleted set: %q", got)
		}
		mustApply(t, s, "kv.recreate", batchOf(3, setEvent(t, k, 4, add, "kept", 1, 4)))
		if got := mustMembers(t, s, k); !slices.Equal(got, []string{"kept"}) {
			t.Fatalf("members %q, want [kept] (old belongs to the deleted set)", got)
		}
	})

	t.Run("OKAnyContentInByteOrder", func(t *testing.T) {
		k := "tenant/t/project/p/content"
		members := []string{"Zed", "a b", "a/b:c?d#e%f", "é", "日本", "\"quoted\"", "a\tb", "~"}
		var evs []contract.Event
		for i, m := range members {
			evs = append(evs, setEvent(t, k, int64(i+1), add, m, int64(i+1), 1))
		}
		mustApply(t, s, "kv.content", batchOf(0, evs...))
		want := slices.Clone(members)
		slices.Sort(want) // Go compares strings bytewise, as COLLATE "C"
		if got := mustMembers(t, s, k); !slices.Equal(got, want) {
			t.Fatalf("members %q, want %q", got, want)
		}
		h := historyOf(t, pool, k, 1)
		if h.Element == nil || h.Element.Member != "Zed" {
			t.Fatalf("history event has element %+v", h.Element)
		}
	})
}

// historyOf reads the event of key at version from kv_history.
func historyOf(tb testing.TB, pool *pgxpool.Pool, key string, version int64) contract.Event {
	tb.Helper()
	var raw []byte
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(event, event_text::jsonb) FROM kv_history WHERE key = $1 AND version = $2`, key, version).Scan(&raw); err != nil {
		tb.Fatal(err)
	}
	var e contract.Event
	if err := json.Unmarshal(raw, &e); err != nil {
		tb.Fatal(err)
	}
	return e
}

// TestCompareElements: Compare names a set whose members differ between
// two projections (column "elements"), such as a rebuild from a log that
// lost element changes (compaction did, before they had record keys of
// their own: docs/collections.md); rows of an earlier set of the key are
// not members and do not count.
func TestCompareElements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const k = "tenant/t/project/p/set"
	log := batchOf(0, setEvent(t, k, 1, contract.ElementAdd, "a", 1, 1), setEvent(t, k, 2, contract.ElementAdd, "b", 2, 1))
	for _, tc := range []struct {
		name    string
		rebuilt []projection.Applied
		extra   string // run on the live projection
		differs bool
	}{
		{"OKSameLog", log, "", false},
		{"OKOrphanRowsIgnored", log, `INSERT INTO kv_elements VALUES ('` + k + `', 'orphan', 0)`, false},
		{"ErrLostChangeLosesMembers", log[1:], "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := testenv.MustPostgresDB(t)
			mustApply(t, projection.New(pg.Pool), topic, log)
			mustApply(t, projection.New(pg.MustSchema(t, "rebuilt")), topic, tc.rebuilt)
			if tc.extra != "" {
				if _, err := pg.Pool.Exec(ctx, tc.extra); err != nil {
					t.Fatal(err)
				}
			}
			d, err := projection.Compare(ctx, pg.Pool, projection.DiffSpec{Schema: "rebuilt", Against: "public", Topic: topic, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			want := []projection.KeyDiff{{Key: k, InSchema: true, InAgainst: true, Version: 2, AgainstVersion: 2, Columns: []string{"elements"}}}
			if d.Equal() == tc.differs || (tc.differs && !slices.EqualFunc(d.Keys, want, func(a, b projection.KeyDiff) bool { return fmt.Sprint(a) == fmt.Sprint(b) })) {
				t.Fatalf("diff %+v, keys %+v; want differs %v", d, d.Keys, tc.differs)
			}
		})
	}
}

// TestApplyElementsOverlappingProjectors: two projectors overlapping
// after a rebalance apply an older and a newer batch of one set at once,
// in either order: the newer changes win (the member added then removed
// stays removed), never the older batch committed last.
func TestApplyElementsOverlappingProjectors(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	const rounds = 40
	for i := range rounds {
		k := fmt.Sprintf("tenant/t/project/p/overlap-%d", i)
		add := setEvent(t, k, 1, contract.ElementAdd, "x", 1, 1)
		rem := setEvent(t, k, 2, contract.ElementRemove, "x", 0, 1)
		older, newer := batchOf(0, add), batchOf(0, add, rem)
		errs := make(chan error, 2)
		go func() { errs <- s.Apply(context.Background(), "kv.overlap", newer) }()
		go func() { errs <- s.Apply(context.Background(), "kv.overlap", older) }()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if v, err := s.Element(context.Background(), projection.ElementRef{Collection: k, Member: "x"}); err != nil || v != 0 {
			t.Fatalf("round %d: x has a row at version %d (%v): the older batch undid the newer one", i, v, err)
		}
	}
}
