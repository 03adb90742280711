package watch_test

import (
	"errors"
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

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/watch"
)

// bigEvent is version v of key with a value of n random letters.
func bigEvent(rng *rand.Rand, key string, v int64, n int) contract.Event {
	e := event(key, v)
	b := make([]byte, n+2)
	b[0], b[n+1] = '"', '"'
	for i := 1; i <= n; i++ {
		b[i] = byte('a' + rng.IntN(26))
	}
	e.After = b
	return e
}

func metricSum(t *testing.T, reg prometheus.Gatherer, n, label string) float64 {
	t.Helper()
	return testenv.MetricSum(t, reg, n, label)
}

// heapInUse is the heap in use after a collection: what is live.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// TestUnreadCatchUpsHoldBoundedMemory: 20 watches start from the
// beginning of a log of 200 events of 32 KiB (6.4 MiB), and their
// clients stop reading after a few events (none for some). Together they
// never hold more than their byte budgets (20 × ESKV_WATCH_BUFFER_BYTES
// of buffered events, the heap in use grows less than
// ESKV_WATCH_MEMORY_BYTES); each is ended slow_consumer with the cursor
// of the last event its client took, and a watch after that cursor
// gets exactly the rest of the log.
func TestUnreadCatchUpsHoldBoundedMemory(t *testing.T) {
	const (
		watchers   = 20
		n          = 200
		valueBytes = 32 << 10
	)
	b := testenv.MustBroker(t, 1)
	prefix := scope + "/big/"
	end := produceBig(t, b, prefix, n, valueBytes)
	reg := prometheus.NewRegistry()
	hub, err := watch.New(watch.Config{Brokers: b.Addrs, Topic: b.Topics.Changes, Partitions: 1, Stall: time.Second}, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	base := heapInUse()

	type watcher struct {
		sub  *watch.Sub
		took []contract.Cursor
	}
	ws := make([]*watcher, watchers)
	var wg sync.WaitGroup
	for i := range ws {
		sub, err := hub.Watch(t.Context(), watch.Spec{Prefix: prefix, After: &contract.Cursor{Partition: 0, Offset: -1}})
		if err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
		defer sub.Close()
		w := &watcher{sub: sub}
		ws[i] = w
		wg.Go(func() { // takes 3i events, then stops reading
			for len(w.took) < 3*i {
				it, ok := <-sub.C
				if !ok {
					return // ended before: its cursor says where
				}
				w.took = append(w.took, it.Cursor)
			}
		})
	}
	peak, peakBuffered := pollMemory(t, hub, reg, watchers, base)
	wg.Wait()
	for _, w := range ws {
		for it := range w.sub.C { // the one its pump held, at most
			w.took = append(w.took, it.Cursor)
		}
	}
	if got := hub.BufferedBytes(); got != 0 {
		t.Fatalf("%d bytes still buffered after every watch ended", got)
	}
	for i, w := range ws {
		var e *contract.Error
		if !errors.As(w.sub.Err(), &e) || e.Code != contract.ESlowConsumer {
			t.Fatalf("watcher %d ended with %v, want slow_consumer", i, w.sub.Err())
		}
		resume := w.sub.Resume()
		if want := w.sub.Start(); len(w.took) > 0 {
			want = w.took[len(w.took)-1]
			if resume != want {
				t.Fatalf("watcher %d took %d events, the last at %v, and resumes after %v", i, len(w.took), want, resume)
			}
		} else if resume != want {
			t.Fatalf("watcher %d took nothing and resumes after %v, not its start %v", i, resume, want)
		}
		if i%4 == 0 { // resume some: decoding the whole log 20 times is slow under -race
			wg.Go(func() { assertResumes(t, hub, prefix, resume, w.took, end) })
		}
	}
	wg.Wait()
	t.Logf("%d unread catch-up watches over %d MiB of events: heap in use +%d MiB at most, %d KiB buffered at most; each ended slow_consumer with the cursor of the last event it took; 5 resumed exactly",
		watchers, n*valueBytes>>20, peak>>20, peakBuffered>>10)
}

// produceBig commits n events of prefix with values of valueBytes, five
// a transaction, and returns the end of the log.
func produceBig(t *testing.T, b *testenv.Broker, prefix string, n, valueBytes int) int64 {
	prod := testenv.MustProducer(t, b)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < n; i += 5 {
		var evs []any
		for j := i; j < i+5; j++ {
			evs = append(evs, bigEvent(rng, fmt.Sprintf("%sk%d", prefix, j%10), int64(j/10+1), valueBytes))
		}
		prod.Commit(t, evs...)
	}
	return prod.Committed(t)[0]
}

// pollMemory samples the heap in use (above base) and the hub's
// buffered bytes until the watchers unread watches ended slow_consumer,
// failing as soon as the heap grows beyond ESKV_WATCH_MEMORY_BYTES or
// the buffers beyond their budgets, and returns the peaks.
func pollMemory(t *testing.T, hub *watch.Hub, reg prometheus.Gatherer, watchers, base int64) (peak, peakBuffered int64) {
	t.Helper()
	limit := int64(watch.DefaultMemoryBytes)
	deadline := time.Now().Add(30 * time.Second)
	for metricSum(t, reg, "eskv_writer_watch_ends_total", "reason=slow_consumer") < float64(watchers) {
		peak = max(peak, heapInUse()-base)
		peakBuffered = max(peakBuffered, hub.BufferedBytes())
		if peak > limit || peakBuffered > watchers*watch.DefaultBufferBytes {
			t.Fatalf("%d unread catch-up watches: heap in use grew %d MiB (limit %d MiB), %d KiB of events buffered",
				watchers, peak>>20, limit>>20, peakBuffered>>10)
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, %v of %d unread catch-up watches ended slow_consumer (heap in use +%d MiB)",
				metricSum(t, reg, "eskv_writer_watch_ends_total", "reason=slow_consumer"), watchers, peak>>20)
		}
		time.Sleep(20 * time.Millisecond) // the sampling period of the poll
	}
	return peak, peakBuffered
}

// assertResumes checks that a watch after resume delivers every offset
// from resume+1 to end-1 (every record of the log is an event of
// prefix), each once, in order, after the took events before it.
func assertResumes(t *testing.T, hub *watch.Hub, prefix string, resume contract.Cursor, took []contract.Cursor, end int64) {
	sub, err := hub.Watch(t.Context(), watch.Spec{Prefix: prefix, After: &resume})
	if err != nil {
		t.Error(err)
		return
	}
	defer sub.Close()
	var got []string
	for _, c := range took {
		got = append(got, fmt.Sprint(c.Offset))
	}
	for it := range sub.C {
		got = append(got, fmt.Sprint(it.Cursor.Offset))
		if it.Cursor.Offset == end-2 { // the last record before the commit marker
			break
		}
	}
	var want []string
	for o := range end - 1 {
		if o%6 != 5 { // every sixth offset is a transaction's commit marker
			want = append(want, fmt.Sprint(o))
		}
	}
	if g, w := strings.Join(got, " "), strings.Join(want, " "); g != w {
		t.Errorf("resumed after %v: got %s\nwant %s (err %v)", resume, g, w, sub.Err())
	}
}

// TestCatchUpMemoryShares: watches from the past hold catch-up memory
// (2 × BufferBytes each) while they catch up; a principal holds at most
// a quarter of it (429 too_many_requests on ESKV_WATCH_MEMORY_BYTES at
// once), and once it is all held a watch from the past waits a moment,
// then gets the same answer, while a watch from now needs none. A
// catch-up that ends gives its memory back.
func TestCatchUpMemoryShares(t *testing.T) {
	const bufferBytes = 64 << 10
	b := testenv.MustBroker(t, 1)
	prod := testenv.MustProducer(t, b)
	rng := rand.New(rand.NewPCG(5, 6))
	prefix := scope + "/big/"
	for i := range 20 {
		prod.Commit(t, bigEvent(rng, fmt.Sprintf("%sk%d", prefix, i), 1, 32<<10), bigEvent(rng, fmt.Sprintf("%sk%d", prefix, i), 2, 32<<10))
	}
	reg := prometheus.NewRegistry()
	hub, err := watch.New(watch.Config{Brokers: b.Addrs, Topic: b.Topics.Changes, Partitions: 1,
		BufferBytes: bufferBytes, MemoryBytes: 8 * 2 * bufferBytes, Stall: time.Hour}, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	fromStart := func(principal string) (*watch.Sub, error) {
		return hub.Watch(t.Context(), watch.Spec{Prefix: prefix, Principal: principal, After: &contract.Cursor{Partition: 0, Offset: -1}})
	}
	refused := func(err error, what string) {
		t.Helper()
		var e *contract.Error
		if !errors.As(err, &e) || e.Code != contract.ETooManyRequests || e.Field != "ESKV_WATCH_MEMORY_BYTES" || e.RetryAfterSeconds < 1 {
			t.Fatalf("%s: %v, want too_many_requests on ESKV_WATCH_MEMORY_BYTES with Retry-After", what, err)
		}
	}
	var held []*watch.Sub
	for _, p := range []string{"a", "b", "c", "d"} {
		for range 2 {
			sub, err := fromStart(p)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			defer sub.Close()
			held = append(held, sub)
		}
	}
	_, err = fromStart("a")
	refused(err, "a third catch-up of a principal holding its quarter")
	start := time.Now()
	_, err = fromStart("e")
	refused(err, "a catch-up while all the memory is held")
	waited := time.Since(start)
	if waited < 900*time.Millisecond {
		t.Fatalf("refused after %v, without waiting for memory", waited)
	}
	now, err := hub.Watch(t.Context(), watch.Spec{Prefix: prefix, Principal: "e"})
	if err != nil {
		t.Fatalf("a watch from now: %v", err)
	}
	defer now.Close()
	if n := metricSum(t, reg, "eskv_writer_watch_catchups", ""); n != 8 {
		t.Fatalf("eskv_writer_watch_catchups = %v, want 8", n)
	}
	held[0].Close()
	sub, err := fromStart("e")
	if err != nil {
		t.Fatalf("a catch-up once one ended: %v", err)
	}
	defer sub.Close()
	if n := metricSum(t, reg, "eskv_writer_watches_refused_total", "limit=ESKV_WATCH_MEMORY_BYTES"); n != 2 {
		t.Fatalf("eskv_writer_watches_refused_total{limit=ESKV_WATCH_MEMORY_BYTES} = %v, want 2", n)
	}
	t.Logf("8 catch-ups held the memory; a principal's third and a ninth were refused (the ninth after %v); a watch from now and, once one ended, another catch-up were not",
		waited.Round(time.Millisecond))
}

// TestLiveWatchBufferBytes: a joined watch whose client does not read
// is ended slow_consumer once its buffer holds BufferBytes of events,
// long before Buffer events, and its buffer is given back at once.
func TestLiveWatchBufferBytes(t *testing.T) {
	b := testenv.MustBroker(t, 1)
	prod := testenv.MustProducer(t, b)
	reg := prometheus.NewRegistry()
	hub, err := watch.New(watch.Config{Brokers: b.Addrs, Topic: b.Topics.Changes, Partitions: 1, BufferBytes: 128 << 10}, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	prefix := scope + "/live/"
	sub, err := hub.Watch(t.Context(), watch.Spec{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	for v := int64(1); metricSum(t, reg, "eskv_writer_watch_ends_total", "reason=slow_consumer") == 0; v++ {
		if v > 100 {
			t.Fatalf("100 events of 32 KiB did not end a watch with a buffer of 128 KiB (%d bytes buffered)", hub.BufferedBytes())
		}
		prod.Commit(t, bigEvent(rng, prefix+"k", v, 32<<10))
	}
	want := sub.Start()
	for it := range sub.C { // the one its pump held, at most
		want = it.Cursor
	}
	var e *contract.Error
	if !errors.As(sub.Err(), &e) || e.Code != contract.ESlowConsumer || sub.Resume() != want {
		t.Fatalf("ended with %v, resume after %v; want slow_consumer, resume after %v", sub.Err(), sub.Resume(), want)
	}
	if n := hub.BufferedBytes(); n != 0 {
		t.Fatalf("%d bytes still buffered", n)
	}
}

// TestLiveWatchStall: a joined watch whose client stops reading while
// no more events come is ended slow_consumer once it took nothing for
// Stall, its buffer given back then, not at its connection's write
// deadline.
func TestLiveWatchStall(t *testing.T) {
	b := testenv.MustBroker(t, 1)
	prod := testenv.MustProducer(t, b)
	reg := prometheus.NewRegistry()
	hub, err := watch.New(watch.Config{Brokers: b.Addrs, Topic: b.Topics.Changes, Partitions: 1, Stall: 200 * time.Millisecond}, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	prefix := scope + "/live/"
	sub, err := hub.Watch(t.Context(), watch.Spec{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	prod.Commit(t, event(prefix+"a", 1), event(prefix+"b", 1), event(prefix+"c", 1))
	first := (<-sub.C).Cursor // the client takes one, then stops reading
	deadline := time.Now().Add(10 * time.Second)
	for metricSum(t, reg, "eskv_writer_watch_ends_total", "reason=slow_consumer") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a client that stopped reading was not ended in 10s (%d bytes buffered)", hub.BufferedBytes())
		}
		time.Sleep(10 * time.Millisecond) // the poll's period
	}
	if _, ok := <-sub.C; ok {
		t.Fatal("an event after the end")
	}
	if n := hub.BufferedBytes(); n != 0 {
		t.Fatalf("%d bytes still buffered", n)
	}
	var e *contract.Error
	if !errors.As(sub.Err(), &e) || e.Code != contract.ESlowConsumer || sub.Resume() != first {
		t.Fatalf("ended with %v, resume after %v; want slow_consumer, resume after %v", sub.Err(), sub.Resume(), first)
	}
}
