package projection_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestPageAt: a page as of a position (PageAsOf, a listing's later page:
// AsOf.Snapshot, expiries at now) answers each key's state then —
// from kv_entries when its latest event is at or before the position,
// else from kv_history (a key changed since at its version then, a key
// deleted since as it was, a key created since absent) — filtered,
// limited and truncated as a listing; once the retention removed a
// version it needs, snapshot_expired. Snapshot and StateAt tell the
// projector's position (-1 for a partition never applied).
func TestPageAt(t *testing.T) {
	t.Parallel()
	s := projection.New(testenv.MustPostgres(t))
	ctx := context.Background()
	const topic, p = "kv.changes", "tenant/t/project/at/"
	mustApply(t, s, topic, batchOf(0, put(t, p+"a", 1, `{"s":"x"}`), put(t, p+"b", 1, `{"s":"x"}`), put(t, p+"c", 1, `{"s":"y"}`)))
	mustApply(t, s, topic, batchOf(3, put(t, p+"a", 2, `{"s":"y"}`), event(t, contract.KindDelete, p+"b", 2, ""), put(t, p+"d", 1, `{"s":"x"}`)))
	at, err := s.Snapshot(ctx, topic, 0, func(*projection.Store) error { return nil })
	if err != nil || at != (contract.Cursor{Partition: 0, Offset: 5}) {
		t.Fatalf("Snapshot: %v %v, want p0.o5", at, err)
	}
	if at, err := s.Snapshot(ctx, topic, 1, func(*projection.Store) error { return nil }); err != nil || at.Offset != -1 {
		t.Fatalf("Snapshot of a partition never applied: %v %v, want offset -1", at, err)
	}
	if st, pos, err := s.StateAt(ctx, topic, 0, p+"a"); err != nil || pos != 5 || st.Version != 2 {
		t.Fatalf("StateAt: version %d at %d (%v), want 2 at 5", st.Version, pos, err)
	}
	if st, pos, err := s.StateAt(ctx, topic, 0, p+"zz"); err != nil || pos != 5 || st.Version != 0 {
		t.Fatalf("StateAt of a key never written: version %d at %d (%v), want 0 at 5", st.Version, pos, err)
	}
	now := t0.Add(time.Hour)
	x := filter("s", contract.FilterEq, `"x"`)
	for _, tc := range []struct {
		name      string
		at        int64
		f         *projection.Filter
		limit     int
		want      string
		truncated bool
	}{
		{"OKBeforeTheChanges", 2, nil, 10, "a@1 b@1 c@1", false},
		{"OKMidBatch", 3, nil, 10, "a@2 b@1 c@1", false},
		{"OKLatest", 5, nil, 10, "a@2 c@1 d@1", false},
		{"OKBeforeAnything", -1, nil, 10, "", false},
		{"OKLimit", 2, nil, 2, "a@1 b@1", true},
		{"OKFilterThen", 2, &x, 10, "a@1 b@1", false},
		{"OKFilterLatest", 5, &x, 10, "d@1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries, truncated, err := s.PageAsOf(ctx, p, tc.f, projection.AsOf{Offset: tc.at, Time: &now, Snapshot: true}, projection.Page{Limit: tc.limit, MaxBytes: noBudget, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, strings.TrimPrefix(e.Key, p)+"@"+strconv.FormatInt(e.Version, 10))
			}
			if strings.Join(got, " ") != tc.want || truncated != tc.truncated {
				t.Fatalf("got %v truncated=%v, want %s truncated=%v", got, truncated, tc.want, tc.truncated)
			}
		})
	}
	t.Run("OKHistoryValue", func(t *testing.T) {
		entries, _, err := s.PageAsOf(ctx, p, nil, projection.AsOf{Offset: 2, Time: &now, Snapshot: true}, projection.Page{Limit: 1, MaxBytes: noBudget, Now: now})
		if err != nil || len(entries) != 1 || string(entries[0].Value) != `{"s":"x"}` || entries[0].Semantics.Purpose != "checkpoint" {
			t.Fatalf("a at 2: %+v %v", entries, err)
		}
	})
	if _, err := s.PruneHistory(ctx, projection.Retention{MaxVersions: 1}, now, projection.PruneBatch{Keys: 100, Rows: 100}); err != nil {
		t.Fatal(err)
	}
	t.Run("ErrSnapshotExpired", func(t *testing.T) {
		_, _, err := s.PageAsOf(ctx, p, nil, projection.AsOf{Offset: 2, Time: &now, Snapshot: true}, projection.Page{Limit: 10, MaxBytes: noBudget, Now: now})
		if contract.ErrorCode(err) != contract.ESnapshotExpired {
			t.Fatalf("error %v, want %s", err, contract.ESnapshotExpired)
		}
	})
	t.Run("OKAfterRetentionWhereNothingChanged", func(t *testing.T) {
		entries, _, err := s.PageAsOf(ctx, p, nil, projection.AsOf{Offset: 2, Time: &now, Snapshot: true}, projection.Page{After: p + "b", Limit: 10, MaxBytes: noBudget, Now: now})
		if err != nil || len(entries) != 1 || !slices.ContainsFunc(entries, func(e contract.Entry) bool { return e.Key == p+"c" }) {
			t.Fatalf("after b at 2: %+v %v, want c", entries, err)
		}
	})
}

// TestSnapshotsLeaveConnections: however many snapshots (the writer's
// page reads) are in progress, at most half the pool's connections are
// theirs: a read of one key (as the write path's batch reads and GETs
// are) still finds a connection at once. Before the bound, 4 listings of
// one tenant held every connection of a 4-connection pool (pgxpool's
// default on 2 CPUs) and the key's read waited for them.
func TestSnapshotsLeaveConnections(t *testing.T) {
	t.Parallel()
	s := projection.New(poolOf(t, 4))
	const topic, key = "kv.changes", "tenant/t/project/p/k"
	mustApply(t, s, topic, batchOf(0, put(t, key, 1, `"v"`)))

	// 8 snapshots at once, each holding on until release closes.
	release := make(chan struct{})
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := s.Snapshot(ctx, topic, 0, func(v *projection.Store) error {
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				inside.Add(-1)
				_, err := v.State(ctx, key)
				return err
			})
			if err != nil {
				t.Errorf("snapshot: %v", err)
			}
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for inside.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // any further snapshot would be in by now
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	st, err := s.State(ctx, key)
	cancel()
	close(release)
	wg.Wait()
	if err != nil || st.Version != 1 {
		t.Errorf("a key's read while 8 snapshots wanted the pool: version %d, %v; want 1 at once", st.Version, err)
	}
	if got := most.Load(); got != 2 {
		t.Errorf("at most %d snapshots at once on a pool of 4 connections, want 2 (half)", got)
	}
}

// TestSnapshotsShareSlotsFairly: a snapshot slot that frees while
// several readers wait goes to the reader holding the fewest, not to the
// earliest waiter: reader a holds both slots of a 4-connection pool and
// queues two more snapshots; b's, queued after them, is the next in when
// one of a's ends. First come, first served, b waited behind every
// snapshot a had queued.
func TestSnapshotsShareSlotsFairly(t *testing.T) {
	t.Parallel()
	s := projection.New(poolOf(t, 4))
	const topic = "kv.changes"
	var mu sync.Mutex
	var order []string
	holds := map[string]chan struct{}{}
	for _, name := range []string{"a1", "a2", "a3", "a4", "b1"} {
		holds[name] = make(chan struct{})
	}
	var wg sync.WaitGroup
	start := func(reader, name string) {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(projection.WithReader(context.Background(), reader), 30*time.Second)
			defer cancel()
			if _, err := s.Snapshot(ctx, topic, 0, func(*projection.Store) error {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				<-holds[name]
				return nil
			}); err != nil {
				t.Errorf("snapshot %s: %v", name, err)
			}
		})
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	entered := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return len(order) >= n }
	}
	defer func() {
		for _, h := range holds {
			select {
			case <-h:
			default:
				close(h)
			}
		}
		wg.Wait()
	}()
	start("a", "a1")
	start("a", "a2")
	waitFor("a's two snapshots in", entered(2))
	start("a", "a3")
	waitFor("a3 waiting", func() bool { return projection.SnapshotsWaiting(s) == 1 })
	start("a", "a4")
	waitFor("a4 waiting", func() bool { return projection.SnapshotsWaiting(s) == 2 })
	start("b", "b1")
	waitFor("b1 waiting", func() bool { return projection.SnapshotsWaiting(s) == 3 })
	close(holds[order[0]])
	waitFor("the next snapshot in", entered(3))
	mu.Lock()
	next := order[2]
	mu.Unlock()
	if next != "b1" {
		t.Fatalf("a slot freed while a's a3 and a4 and then b's b1 waited went to %s, want b1 (b held none, a two)", next)
	}
}

// poolOf is a pool of at most conns connections to a fresh database,
// closed when the test ends.
func poolOf(tb testing.TB, conns int32) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(testenv.MustPostgresDB(tb).URL)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}
