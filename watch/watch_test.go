package watch_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/watch"
)

const scope = "tenant/t/project/p"

func event(key string, version int64) contract.Event {
	now := time.Now().UTC()
	return contract.Event{SchemaVersion: contract.SchemaVersion, Key: key, Scope: scope, Version: version, PrevVersion: version - 1,
		Kind: contract.KindPut, Op: contract.OpSet, After: []byte(fmt.Sprintf(`%d`, version)), CreatedAt: now, TS: now,
		Semantics: contract.Semantics{Purpose: "other"}, Principal: "tester", WriterEpoch: 1}
}

// TestCatchUpThenJoin: while transactions (some aborted) are committed,
// watches start after random cursors, with the tailer running or not;
// each receives exactly the committed records of its prefix after its
// cursor, in log order, as a read of the whole log finds them.
func TestCatchUpThenJoin(t *testing.T) {
	b := testenv.MustBroker(t, 1)
	prod := testenv.MustProducer(t, b)
	hub, err := watch.New(watch.Config{Brokers: b.Addrs, Topic: b.Topics.Changes, Partitions: 1, Buffer: 100_000}, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	prefix := scope + "/a/"
	versions := map[string]int64{}
	next := func(key string) contract.Event { versions[key]++; return event(key, versions[key]) }
	rng := rand.New(rand.NewPCG(1, 2))
	produce := func(n int) {
		for range n {
			var evs []any
			for range 1 + rng.IntN(4) {
				evs = append(evs, next(fmt.Sprintf("%s/%s/k%d", scope, []string{"a", "b", "ab"}[rng.IntN(3)], rng.IntN(10))))
			}
			if rng.IntN(10) == 0 {
				prod.Abort(t, evs...)
				continue
			}
			prod.Commit(t, evs...)
		}
	}
	produce(200)
	type watcher struct {
		after int64
		got   []contract.Cursor
		err   error
	}
	var (
		mu       sync.Mutex
		watchers []*watcher
		wg       sync.WaitGroup
	)
	endKey := prefix + "end"
	start := func(after int64) {
		var spec watch.Spec
		spec.Prefix = prefix
		if after >= -1 {
			spec.After = &contract.Cursor{Partition: 0, Offset: after}
		}
		sub, err := hub.Watch(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		w := &watcher{after: after}
		if after < -1 {
			w.after = sub.Start().Offset
		}
		mu.Lock()
		watchers = append(watchers, w)
		mu.Unlock()
		wg.Go(func() {
			defer sub.Close()
			for it := range sub.C {
				w.got = append(w.got, it.Cursor)
				if it.Event.Key == endKey {
					return
				}
			}
			w.err = sub.Err()
		})
	}
	for round := range 10 {
		end := prod.Committed(t)[0]
		start(-2)                      // now
		start(-1)                      // from the first record
		start(rng.Int64N(end))         // an older cursor
		start(end - 1 - rng.Int64N(5)) // close to the end
		produce(50 + round)
	}
	prod.Commit(t, next(endKey))
	wg.Wait()

	want := map[int64]bool{} // offsets of the prefix's committed records
	var offsets []int64
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	err = changelog.ReadCommitted(context.Background(), cl, changelog.Range{Topic: b.Topics.Changes, Partition: 0, From: 0, End: prod.Committed(t)[0]}, func(r *kgo.Record) error {
		if strings.HasPrefix(string(r.Key), prefix) {
			want[r.Offset] = true
			offsets = append(offsets, r.Offset)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range watchers {
		if w.err != nil {
			t.Fatalf("watcher %d (after %d): %v", i, w.after, w.err)
		}
		var exp []int64
		for _, o := range offsets {
			if o > w.after {
				exp = append(exp, o)
			}
		}
		got := make([]int64, len(w.got))
		for j, c := range w.got {
			got[j] = c.Offset
		}
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Fatalf("watcher %d after %d: got %d records %v\nwant %d %v", i, w.after, len(got), got, len(exp), exp)
		}
	}
	if n := hub.Watches(); n != 0 {
		t.Fatalf("%d watches still counted", n)
	}
	t.Logf("%d watchers, each exactly the log's records of %s after its cursor (%d in all)", len(watchers), prefix, len(offsets))
}

// TestPendingAfterTheLastEvent: a client that took the last buffered
// event sees Pending() == 0 at once, so the server flushes that event
// (api's stream flushes when Pending is 0). The watch catches up on 50
// events, and the client takes the last one while the pump waits on C
// with it; with one P the pump cannot run between the client's receive
// and its Pending. Before the fix the
// event the pump had just handed over still counted: the last event of
// every burst stayed in the response buffer until the next event or the
// heartbeat (15 s), and chaos watchers missed the log's last events.
func TestPendingAfterTheLastEvent(t *testing.T) {
	b := testenv.MustBroker(t, 1)
	prod := testenv.MustProducer(t, b)
	hub := mustHub(t, b)
	const n = 50
	for v := range int64(n) {
		prod.Commit(t, event(scope+"/k", v+1))
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for round := range 5 {
		sub, err := hub.Watch(t.Context(), watch.Spec{Prefix: scope + "/", After: &contract.Cursor{Partition: 0, Offset: -1}})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for sub.Pending() < n-1 && time.Now().Before(deadline) { // the catch-up buffered them
			time.Sleep(time.Millisecond)
		}
		for i := range n {
			if i == n-1 {
				time.Sleep(5 * time.Millisecond) // the pump waits on C with the last one
			}
			if _, ok := <-sub.C; !ok {
				t.Fatalf("round %d: the watch ended after %d events: %v", round, i, sub.Err())
			}
		}
		if p := sub.Pending(); p != 0 {
			t.Fatalf("round %d: Pending() = %d right after the client took the last of %d events; want 0 (the server would not flush it)", round, p, n)
		}
		sub.Close()
	}
}

// TestWatchesCountsStartedWatches: a watch from now is counted by
// Watches only once its position in the log is fixed, so that a caller
// who waits for the count and then writes gets the write. The hub's
// first reads of the log's offsets are held back by the broker; while
// they are, the watch is not counted. (Before, it was counted at once:
// kvctl's watch test wrote, then the watch started after the write and
// missed it.)
func TestWatchesCountsStartedWatches(t *testing.T) {
	b := testenv.MustBroker(t, 1)
	prod := testenv.MustProducer(t, b)
	hub := mustHub(t, b)
	prod.Commit(t, event(scope+"/before", 1))

	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.Cluster.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		b.Cluster.KeepControl()
		once.Do(func() {
			close(held)
			b.Cluster.SleepControl(func() { <-release })
		})
		return nil, nil, false
	})
	type started struct {
		sub *watch.Sub
		err error
	}
	done := make(chan started, 1)
	go func() {
		sub, err := hub.Watch(t.Context(), watch.Spec{Prefix: scope + "/"})
		done <- started{sub, err}
	}()
	<-held
	if n := hub.Watches(); n != 0 {
		t.Errorf("a watch reading the log's bounds counted: Watches() = %d, want 0", n)
	}
	close(release)
	s := <-done
	if s.err != nil {
		t.Fatal(s.err)
	}
	defer s.sub.Close()
	if n := hub.Watches(); n != 1 {
		t.Fatalf("a started watch: Watches() = %d, want 1", n)
	}
	prod.Commit(t, event(scope+"/after", 1))
	select {
	case it := <-s.sub.C:
		if it.Event == nil || it.Event.Key != scope+"/after" {
			t.Fatalf("first item %+v, want the event written after the watch counted", it)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30 s")
	}
}

// mustHub starts a hub of b's one-partition changes topic with the
// default limits, closed at the test's end.
func mustHub(t *testing.T, b *testenv.Broker) *watch.Hub {
	t.Helper()
	hub, err := watch.New(watch.Config{Brokers: b.Addrs, Topic: b.Topics.Changes, Partitions: 1}, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.Close)
	return hub
}
