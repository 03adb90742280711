package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/writer/statecache"
)

// countingProjection is the Postgres projection, counting the reads of
// keys' states: GETs (State, StateAt), the keys a batch asks (Find) and
// the queries of States (Lookup).
type countingProjection struct {
	*projection.Store
	gets, keys, lookups atomic.Int64
}

func (c *countingProjection) LookupAt(ctx context.Context, topic string, partition int32, keys []string) (projection.Found, int64, error) {
	c.lookups.Add(1)
	return c.Store.LookupAt(ctx, topic, partition, keys)
}

func (c *countingProjection) Lookup(ctx context.Context, keys []string, refs []projection.RequestRef, elems []projection.ElementRef) (projection.Found, error) {
	c.lookups.Add(1)
	return c.Store.Lookup(ctx, keys, refs, elems)
}

func (c *countingProjection) State(ctx context.Context, key string) (keystate.State, error) {
	c.gets.Add(1)
	return c.Store.State(ctx, key)
}

func (c *countingProjection) StateAt(ctx context.Context, topic string, partition int32, key string) (keystate.State, int64, error) {
	c.gets.Add(1)
	return c.Store.StateAt(ctx, topic, partition, key)
}

func (c *countingProjection) Find(ctx context.Context, q projection.Query) (projection.Found, error) {
	c.keys.Add(int64(len(q.Keys)))
	return c.Store.Find(ctx, q)
}

func (c *countingProjection) reads() (gets, keys int64) { return c.gets.Load(), c.keys.Load() }

// projectedWriter runs a writer and a projector on a broker of one
// partition and a new database until the test ends; the writer reads
// the projection through the returned counter.
func projectedWriter(t testing.TB, cfg Config) (*Writer, *countingProjection) {
	t.Helper()
	b := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	proj := &countingProjection{Store: store}
	cfg.Brokers, cfg.Topics = b.Addrs, b.Topics
	cfg.SessionTimeout = 6 * time.Second
	w, err := New(cfg, proj, discard, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunUntilCleanup(t, "writer", w.Run)
	pr, err := projector.New(projector.Config{Brokers: b.Addrs, Topic: b.Topics.Changes, Partitions: b.Topics.Partitions}, store, discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunUntilCleanup(t, "projector", pr.Run)
	testenv.WaitFor(t, 30*time.Second, "writer ready", w.Ready)
	return w, proj
}

// awaitTrimmed waits until the projector applied every write to keys and
// trim dropped them from the overlay.
func awaitTrimmed(t testing.TB, w *Writer, keys ...contract.Key) {
	t.Helper()
	_, p := w.partition(keys[0])
	testenv.WaitFor(t, 30*time.Second, "the overlay trimmed", func() bool {
		p.mu.RLock()
		defer p.mu.RUnlock()
		for _, k := range keys {
			if _, in := p.overlay[k.String()]; in {
				return false
			}
		}
		return true
	})
}

func counter(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	m := make(chan prometheus.Metric, 1)
	c.Collect(m)
	var d dto.Metric
	if err := (<-m).Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Counter != nil {
		return d.GetCounter().GetValue()
	}
	return d.GetGauge().GetValue()
}

// BenchmarkReadThenCAS is figure 18a in the writer alone: 64 clients
// each read a key (GET) and compare-and-swap it with the version read,
// with the projector running, with and without the state cache. Hot: each
// client writes one key, so often that the overlay nearly always holds
// it. Cold: each client goes round 256 keys of its own (16,384 in all),
// each written once and trimmed before the timer starts, so that the
// projector applied a key's write and trim dropped it before the key is
// written again. pg-reads/op counts the states read from Postgres per
// read-then-CAS.
func BenchmarkReadThenCAS(b *testing.B) {
	for _, load := range []struct {
		name    string
		perUser int
	}{{"Hot", 1}, {"Cold", 256}} {
		for _, cache := range []struct {
			name  string
			bytes int64
		}{{"Cache", 0}, {"NoCache", -1}} {
			b.Run(load.name+"/"+cache.name, func(b *testing.B) {
				benchReadThenCAS(b, load.perUser, cache.bytes)
			})
		}
	}
}

func benchReadThenCAS(b *testing.B, perUser int, cacheBytes int64) {
	const clients = 64
	w, proj := projectedWriter(b, Config{StateCacheBytes: cacheBytes})
	keys := make([][]contract.Key, clients)
	var warm sync.WaitGroup
	for c := range keys {
		keys[c] = make([]contract.Key, perUser)
		for i := range keys[c] {
			keys[c][i] = benchKey(b, fmt.Sprintf("tenant/bench/project/p%d/c%02d-k%03d", c%8, c, i))
		}
		warm.Go(func() {
			for _, k := range keys[c] {
				if err := readThenCAS(b.Context(), w, k); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	warm.Wait()
	awaitTrimmed(b, w, slices.Concat(keys...)...)
	gets0, reads0 := proj.reads()
	var client atomic.Int64
	b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ks := keys[(client.Add(1)-1)%clients]
		for i := 0; pb.Next(); i++ {
			if err := readThenCAS(b.Context(), w, ks[i%len(ks)]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	gets, reads := proj.reads()
	b.ReportMetric(float64(gets-gets0+reads-reads0)/float64(b.N), "pg-reads/op")
}

// readThenCAS is one cycle of figure 18a's clients; a conflict is no
// error.
func readThenCAS(ctx context.Context, w *Writer, k contract.Key) error {
	st, err := w.State(ctx, k)
	if err == nil {
		_, err = cas(ctx, w, k, st.Version, `1`)
	}
	if contract.ErrorCode(err) == contract.EConflict {
		return nil
	}
	return err
}

func cas(ctx context.Context, w *Writer, k contract.Key, expected int64, v string) (Result, error) {
	return w.Do(ctx, &decide.KV{Header: decide.Header{Key: k, Op: contract.OpPut, Principal: "p"}, Value: json.RawMessage(v), ExpectedVersion: &expected})
}

// TestStateCacheAnswersWithoutPostgres: once the projector applied a key's
// writes and trim dropped them from the overlay, a GET and a
// compare-and-swap of the key read no state from Postgres; a key never
// written is read once, then known absent; an expired cached state is
// absent to reads and writes.
func TestStateCacheAnswersWithoutPostgres(t *testing.T) {
	t.Parallel()
	w, proj := projectedWriter(t, Config{SweepInterval: -1})
	ctx := t.Context()
	k := mustKey(t, "tenant/a/project/b/k")
	if _, err := cas(ctx, w, k, 0, `1`); err != nil {
		t.Fatal(err)
	}
	awaitTrimmed(t, w, k)

	t.Run("OKGetAndCASFromTheCache", func(t *testing.T) {
		gets, keys := proj.reads()
		hits := counter(t, w.metrics.cache.Hits)
		st, err := w.State(ctx, k)
		if err != nil || st.Version != 1 || string(st.Entry.Value) != `1` {
			t.Fatalf("GET: %+v %v; want version 1", st, err)
		}
		if res, err := cas(ctx, w, k, 1, `2`); err != nil || res.Entry.Version != 2 {
			t.Fatalf("CAS: %+v %v; want version 2", res, err)
		}
		if g, n := proj.reads(); g != gets || n != keys {
			t.Errorf("Postgres read %d states for GETs and %d for writes; want none", g-gets, n-keys)
		}
		if h := counter(t, w.metrics.cache.Hits) - hits; h != 2 {
			t.Errorf("%v cache hits; want 2", h)
		}
	})
	t.Run("OKSameAsTheProjection", func(t *testing.T) {
		// What trim caches is the row the projection holds, for a live
		// key and for a deleted one.
		d := mustKey(t, "tenant/a/project/b/deleted")
		if _, err := cas(ctx, w, d, 0, `{"a":[1,2]}`); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Do(ctx, &decide.KV{Header: decide.Header{Key: d, Op: contract.OpDelete, Principal: "q", RequestID: "del-1"}}); err != nil {
			t.Fatal(err)
		}
		awaitTrimmed(t, w, k, d)
		_, p := w.partition(k)
		for _, key := range []contract.Key{k, d} {
			cached, ok, _ := p.lookup(key.String())
			row, err := proj.Store.State(ctx, key.String())
			if err != nil || !ok {
				t.Fatalf("%s: cached %v, %v", key, ok, err)
			}
			c, _ := json.Marshal(cached)
			r, _ := json.Marshal(row)
			if string(c) != string(r) {
				t.Errorf("%s: cached %s\nprojection %s", key, c, r)
			}
		}
	})
	t.Run("OKGetFillsTheCache", func(t *testing.T) {
		_, p := w.partition(k)
		p.mu.Lock()
		p.cache.Reset() // as if evicted
		p.mu.Unlock()
		gets, _ := proj.reads()
		for range 2 {
			if st, err := w.State(ctx, k); err != nil || st.Version != 2 {
				t.Fatalf("GET: %+v %v; want version 2", st, err)
			}
		}
		if g, _ := proj.reads(); g != gets+1 {
			t.Errorf("%d GETs read Postgres; want the first only", g-gets)
		}
	})
	t.Run("OKAbsentKeyReadOnce", func(t *testing.T) {
		absent := mustKey(t, "tenant/a/project/b/never")
		_, keys := proj.reads()
		for range 3 {
			if _, err := cas(ctx, w, absent, 5, `1`); contract.ErrorCode(err) != contract.EConflict {
				t.Fatalf("CAS of a key never written: %v; want version_conflict", err)
			}
		}
		if _, n := proj.reads(); n != keys+1 {
			t.Errorf("Postgres read the absent key %d times; want once", n-keys)
		}
	})
	t.Run("OKExpiredIsAbsent", func(t *testing.T) {
		e := mustKey(t, "tenant/a/project/b/expiring")
		res, err := w.Do(ctx, &decide.KV{Header: decide.Header{Key: e, Op: contract.OpPut, Principal: "p"}, Value: json.RawMessage(`1`), TTLSeconds: 1})
		if err != nil || res.Entry.ExpiresAt == nil {
			t.Fatalf("put with a TTL: %+v %v", res, err)
		}
		awaitTrimmed(t, w, e)
		if _, p := w.partition(e); p == nil {
			t.Fatal("the partition is not owned")
		} else if st, ok, _ := p.lookup(e.String()); !ok || st.Visible(time.Now()) == nil {
			t.Fatalf("the expiring key is not cached live: %+v %v", st, ok)
		}
		testenv.WaitFor(t, 10*time.Second, "the entry expired", func() bool { return time.Now().After(*res.Entry.ExpiresAt) })
		gets, _ := proj.reads()
		st, err := w.State(ctx, e)
		if err != nil || st.Visible(time.Now()) != nil {
			t.Fatalf("GET past the expiry: %+v %v; want absent", st, err)
		}
		if g, _ := proj.reads(); g != gets {
			t.Error("GET read Postgres")
		}
		if res, err := cas(ctx, w, e, 0, `2`); err != nil || res.Entry.Version != 2 {
			t.Fatalf("create over the expired entry: %+v %v; want version 2", res, err)
		}
	})
}

// TestStateCacheTinyBudget: with room for a few states only, eviction
// keeps the cache within its budget and every write still decides on the
// key's latest state (from the cache or from Postgres).
func TestStateCacheTinyBudget(t *testing.T) {
	t.Parallel()
	budget := 3 * statecache.Size("tenant/a/project/b/k00", &keystate.State{Entry: contract.Entry{Key: "tenant/a/project/b/k00", Value: json.RawMessage(`100`), LastWriter: "p"}})
	w, proj := projectedWriter(t, Config{StateCacheBytes: budget})
	ctx := t.Context()
	keys := make([]contract.Key, 20)
	for i := range keys {
		keys[i] = mustKey(t, fmt.Sprintf("tenant/a/project/b/k%02d", i))
		if _, err := cas(ctx, w, keys[i], 0, `1`); err != nil {
			t.Fatal(err)
		}
	}
	for round := int64(1); round <= 3; round++ {
		awaitTrimmed(t, w, keys...)
		for _, k := range keys {
			if res, err := cas(ctx, w, k, round, fmt.Sprint(100+round)); err != nil || res.Entry.Version != round+1 {
				t.Fatalf("round %d, %s: %+v %v", round, k, res, err)
			}
		}
	}
	if n := counter(t, w.metrics.cache.Evictions); n == 0 {
		t.Error("nothing evicted")
	}
	if b := counter(t, w.metrics.cache.Bytes); b > float64(budget) || b <= 0 {
		t.Errorf("cache holds %v bytes; want within (0, %d]", b, budget)
	}
	if _, n := proj.reads(); n == 0 {
		t.Error("no state read from Postgres: nothing was evicted before it was read")
	}
}

// cachePartition is a ready partition of an offline writer whose overlay
// holds state at offset 10 for key.
func cachePartition(t *testing.T, cfg Config, key string, state keystate.State) *partition {
	t.Helper()
	cfg.Topics = changelog.Topics{Changes: "c", Conflicts: "x", Partitions: 1}
	p := newPartition(offlineWriter(t, cfg), 0)
	p.setReady(true, 1, map[string]overlayEntry{key: {state: state, offset: 10}})
	return p
}

func version(v int64) keystate.State {
	return keystate.State{Version: v, Live: true, Entry: contract.Entry{Key: "k", Version: v, Value: json.RawMessage(fmt.Sprint(v))}}
}

// TestStateCacheKeepsNewer: whichever of trim (the overlay's state) and
// a read of the projection fills the cache last, the higher version
// stays.
func TestStateCacheKeepsNewer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		overlay   int64 // version trim moves to the cache
		read      int64 // version a read of the projection caches
		readFirst bool
	}{
		{"OKStaleReadAfterTrim", 2, 1, false},
		{"OKTrimAfterStaleRead", 2, 1, true},
		{"OKNewerReadAfterTrim", 1, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := cachePartition(t, Config{}, "k", version(tc.overlay))
			read := func() { p.cacheRead([]string{"k"}, map[string]keystate.State{"k": version(tc.read)}) }
			if tc.readFirst {
				read()
			}
			p.trim(11)
			if !tc.readFirst {
				read()
			}
			want := max(tc.overlay, tc.read)
			if st, ok, _ := p.lookup("k"); !ok || st.Version != want {
				t.Fatalf("cached %+v (%v); want version %d", st, ok, want)
			}
		})
	}
}

// TestStateCacheDiesWithTheOwnership: the cache starts empty with each
// ownership, and a partition no longer ready neither answers nor fills it.
func TestStateCacheDiesWithTheOwnership(t *testing.T) {
	t.Parallel()
	p := cachePartition(t, Config{}, "k", version(3))
	p.trim(11)
	if st, ok, ready := p.lookup("k"); !ok || !ready || st.Version != 3 {
		t.Fatalf("after trim: %+v %v %v", st, ok, ready)
	}
	p.setReady(false, 0, nil)
	p.cacheRead([]string{"j"}, map[string]keystate.State{"j": version(1)}) // a batch read when confirm gave up
	p.setReady(true, 2, map[string]overlayEntry{})
	for _, k := range []string{"k", "j"} {
		if st, ok, _ := p.lookup(k); ok {
			t.Errorf("the new ownership's cache holds %s: %+v", k, st)
		}
	}
	if b := counter(t, p.w.metrics.cache.Bytes); b != 0 {
		t.Errorf("bytes gauge %v after reset; want 0", b)
	}
}

// TestCommittedAfterGivingUp: a transaction that commits after confirm
// gave the partition up (another writer's commit seemed past end, or this
// one's took long to return) leaves the partition alone instead of
// writing to the overlay it no longer has.
func TestCommittedAfterGivingUp(t *testing.T) {
	t.Parallel()
	p := cachePartition(t, Config{}, "k", version(1))
	p.setReady(false, 0, nil)
	ev := &contract.Event{Key: "k", Version: 2}
	p.committed([]*kgo.Record{{Topic: "c", Offset: 11}}, []*contract.Event{ev})
	if p.overlay != nil || p.end != 0 {
		t.Fatalf("overlay %v, end %d; want none and 0", p.overlay, p.end)
	}
}

// TestStateCacheGetFill: a GET's read of the projection is cached only
// when nothing was added to the overlay and the ownership did not change
// while it read.
func TestStateCacheGetFill(t *testing.T) {
	t.Parallel()
	commit := func(p *partition) {
		p.committed([]*kgo.Record{{Topic: "c", Offset: 20}}, []*contract.Event{{Key: "k", Version: 5}})
	}
	restart := func(p *partition) {
		p.setReady(false, 0, nil)
		p.setReady(true, 2, map[string]overlayEntry{})
	}
	for _, tc := range []struct {
		name   string
		during func(p *partition) // between lookupAt and cacheGet
		cached bool
	}{
		{"OKQuiet", func(*partition) {}, true},
		{"OKTrimOnly", func(p *partition) { p.trim(11) }, true},
		{"ErrEventAdded", commit, false},
		{"ErrEventAddedTrimmedEvicted", func(p *partition) { commit(p); p.trim(21); p.cache.Reset() }, false},
		{"ErrNewOwnership", restart, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := cachePartition(t, Config{}, "other", version(1))
			_, ok, ready, looked := p.lookupAt("k")
			if ok || !ready {
				t.Fatalf("lookupAt: %v %v", ok, ready)
			}
			tc.during(p)
			p.cacheGet("k", version(4), looked.changes)
			p.mu.RLock()
			_, cached := p.cache.Get("k")
			p.mu.RUnlock()
			if cached != tc.cached {
				t.Fatalf("cached %v; want %v", cached, tc.cached)
			}
		})
	}
}
