package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// waitWriter runs one writer owning every partition, ready.
func waitWriter(t *testing.T, cfg Config) (*Writer, *testenv.Running) {
	t.Helper()
	broker := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	w, run := startWriter(t, broker, store, cfg)
	testenv.WaitFor(t, 30*time.Second, "writer ready", w.Ready)
	return w, run
}

// waitedAnswer is what a DoWait answered, and after how long.
type waitedAnswer struct {
	res  Result
	err  error
	took time.Duration
}

// doWait runs w.DoWait in a goroutine; its answer comes on the channel.
func doWait(ctx context.Context, w *Writer, cmd decide.Command, wait time.Duration) <-chan waitedAnswer {
	out := make(chan waitedAnswer, 1)
	go func() {
		start := time.Now()
		res, err := w.DoWait(ctx, cmd, wait)
		out <- waitedAnswer{res, err, time.Since(start)}
	}()
	return out
}

// awaitWaiting waits until n calls wait on k.
func awaitWaiting(t *testing.T, w *Writer, k contract.Key, n int) {
	t.Helper()
	testenv.WaitFor(t, 20*time.Second, fmt.Sprintf("%d waiting on %s", n, k), func() bool { return w.Waiting(k) == n })
}

func acquire(k contract.Key, holder string, ttl int64) *decide.Lock {
	return &decide.Lock{Header: decide.Header{Key: k, Op: contract.OpLockAcquire, Principal: "p"}, Holder: holder, TTLSeconds: ttl}
}

func release(k contract.Key, holder string) *decide.Lock {
	return &decide.Lock{Header: decide.Header{Key: k, Op: contract.OpLockRelease, Principal: "p"}, Holder: holder}
}

// TestWaitWokenByCommit: a qpop and an lpop parked on an empty queue
// and list are answered the item a later push adds, each once; a pop
// whose wait ends first is answered the empty refusal, after its wait.
func TestWaitWokenByCommit(t *testing.T) {
	t.Parallel()
	w, _ := waitWriter(t, Config{InstanceID: "a"})
	ctx := t.Context()
	queue, list := mustKey(t, "tenant/a/project/b/jobs"), mustKey(t, "tenant/a/project/b/log")
	qpop := func() *decide.Queue {
		return &decide.Queue{Header: decide.Header{Key: queue, Op: contract.OpQPop, Principal: "p"}}
	}
	lpop := func() *decide.List {
		return &decide.List{Header: decide.Header{Key: list, Op: contract.OpLPop, Principal: "p"}}
	}

	t.Run("OKQueueItemToOneWaiter", func(t *testing.T) {
		a := doWait(ctx, w, qpop(), 20*time.Second)
		awaitWaiting(t, w, queue, 1)
		b := doWait(ctx, w, qpop(), 20*time.Second)
		awaitWaiting(t, w, queue, 2)
		if _, err := w.Do(ctx, &decide.Queue{Header: decide.Header{Key: queue, Op: contract.OpQPush, Principal: "p"}, Value: json.RawMessage(`"x"`)}); err != nil {
			t.Fatal(err)
		}
		var got waitedAnswer
		select {
		case got = <-a:
		case got = <-b:
			t.Fatal("the second waiter was served before the first")
		case <-time.After(10 * time.Second):
			t.Fatal("no waiter answered within 10s of the push")
		}
		if got.err != nil || string(decide.QueuePopAnswer(got.res, qpop()).Data) != `"x"` {
			t.Fatalf("first waiter: %+v %v", got.res, got.err)
		}
		awaitWaiting(t, w, queue, 1) // the second still waits: one item, one pop
		if _, err := w.Do(ctx, &decide.Queue{Header: decide.Header{Key: queue, Op: contract.OpQPush, Principal: "p"}, Value: json.RawMessage(`"y"`)}); err != nil {
			t.Fatal(err)
		}
		if got := <-b; got.err != nil || string(decide.QueuePopAnswer(got.res, qpop()).Data) != `"y"` {
			t.Fatalf("second waiter: %+v %v", got.res, got.err)
		}
	})
	t.Run("OKListValue", func(t *testing.T) {
		a := doWait(ctx, w, lpop(), 20*time.Second)
		awaitWaiting(t, w, list, 1)
		if _, err := w.Do(ctx, &decide.List{Header: decide.Header{Key: list, Op: contract.OpRPush, Principal: "p"}, Value: json.RawMessage(`7`)}); err != nil {
			t.Fatal(err)
		}
		if got := <-a; got.err != nil || string(decide.ListAnswer(got.res).Value) != `7` {
			t.Fatalf("lpop waiter: %+v %v", got.res, got.err)
		}
	})
	t.Run("ErrEmptyAfterWait", func(t *testing.T) {
		got := <-doWait(ctx, w, qpop(), 300*time.Millisecond)
		if contract.ErrorCode(got.err) != contract.EQueueEmpty || got.took < 300*time.Millisecond {
			t.Fatalf("qpop wait 300ms on an empty queue: %v after %v", got.err, got.took)
		}
		if n := w.Waiting(queue); n != 0 {
			t.Fatalf("%d still waiting after the wait ended", n)
		}
	})
}

// TestWaitLockFIFO: 20 acquires waiting on a held lock, each arriving
// after the one before is queued, are granted in arrival order as each
// holder releases; an acquire without wait while they wait is lock_held,
// even at the instant the lock is free.
func TestWaitLockFIFO(t *testing.T) {
	t.Parallel()
	w, _ := waitWriter(t, Config{InstanceID: "a"})
	ctx := t.Context()
	k := mustKey(t, "tenant/a/project/b/mutex")
	if _, err := w.Do(ctx, acquire(k, "h0", 60)); err != nil {
		t.Fatal(err)
	}
	const n = 20
	answers := make([]<-chan waitedAnswer, n+1)
	for i := 1; i <= n; i++ {
		answers[i] = doWait(ctx, w, acquire(k, fmt.Sprintf("h%d", i), 60), 25*time.Second)
		awaitWaiting(t, w, k, i)
	}
	for i := 1; i <= n; i++ {
		if _, err := w.Do(ctx, release(k, fmt.Sprintf("h%d", i-1))); err != nil {
			t.Fatalf("release h%d: %v", i-1, err)
		}
		if i == 1 {
			// The lock is being handed to h1: nobody barges in.
			if _, err := w.Do(ctx, acquire(k, "barger", 60)); contract.ErrorCode(err) != contract.ELockHeld {
				t.Fatalf("an acquire without wait while 20 wait: %v, want lock_held", err)
			}
		}
		got := <-answers[i]
		a, err := decide.LockAnswerOf(&got.res.Entry)
		if got.err != nil || err != nil || a.Holder != fmt.Sprintf("h%d", i) {
			t.Fatalf("grant %d: %+v %v %v, want h%d", i, a, got.err, err, i)
		}
		for j := i + 1; j <= n; j++ {
			select {
			case g := <-answers[j]:
				t.Fatalf("h%d answered out of order (%v) while h%d holds the lock", j, g.err, i)
			default:
			}
		}
	}
}

// TestWaitLockExpiry: a lock whose lease runs out is granted to its head
// waiter by the writer's timer at its expiry, without the sweeper (off
// here) and without a release.
func TestWaitLockExpiry(t *testing.T) {
	t.Parallel()
	w, _ := waitWriter(t, Config{InstanceID: "a", SweepInterval: -1})
	ctx := t.Context()
	k := mustKey(t, "tenant/a/project/b/lease")
	if _, err := w.Do(ctx, acquire(k, "old", 1)); err != nil {
		t.Fatal(err)
	}
	got := <-doWait(ctx, w, acquire(k, "next", 30), 20*time.Second)
	a, err := decide.LockAnswerOf(&got.res.Entry)
	if got.err != nil || err != nil || a.Holder != "next" || got.took > 10*time.Second {
		t.Fatalf("waiter after a 1s lease: %+v %v %v after %v", a, got.err, err, got.took)
	}
}

// TestWaitEndsWithOwnership: waiters parked when the writer gives its
// partitions up are answered partition_unavailable at once, not at the
// end of their wait.
func TestWaitEndsWithOwnership(t *testing.T) {
	t.Parallel()
	w, run := waitWriter(t, Config{InstanceID: "a"})
	ctx := t.Context()
	k := mustKey(t, "tenant/a/project/b/mutex")
	if _, err := w.Do(ctx, acquire(k, "h0", 60)); err != nil {
		t.Fatal(err)
	}
	queue := mustKey(t, "tenant/a/project/b/jobs")
	lockWait := doWait(ctx, w, acquire(k, "h1", 60), 25*time.Second)
	popWait := doWait(ctx, w, &decide.Queue{Header: decide.Header{Key: queue, Op: contract.OpQPop, Principal: "p"}}, 25*time.Second)
	awaitWaiting(t, w, k, 1)
	awaitWaiting(t, w, queue, 1)
	if err := run.Stop(t); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan waitedAnswer{"acquire": lockWait, "qpop": popWait} {
		select {
		case got := <-ch:
			if contract.ErrorCode(got.err) != contract.EUnavailable {
				t.Errorf("%s: %+v %v, want partition_unavailable", name, got.res, got.err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("%s still waits after its writer stopped", name)
		}
	}
}

// TestMarkQueued: before a batch is decided, an acquire of a key with
// waiters is marked queued unless it is their head, so that an acquire
// arriving while a lock's lease ran out virtually (its expiry timer not
// fired yet) does not take it ahead of them.
func TestMarkQueued(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t, Config{})
	p := newPartition(w, 0)
	k := mustKey(t, "tenant/a/project/b/mutex")
	head := &call{cmd: acquire(k, "h1", 60), wait: &waiter{until: time.Now().Add(time.Minute)}}
	p.park(head)
	head.wait.state = waitDeciding // woken
	barger, other := &call{cmd: acquire(k, "b", 60)}, &call{cmd: acquire(mustKey(t, "tenant/a/project/b/free"), "b", 60)}
	rel := &call{cmd: release(k, "h0")}
	p.markQueued([]*call{head, barger, other, rel})
	for name, tc := range map[string]struct {
		c    *call
		want bool
	}{"OKHeadNotQueued": {head, false}, "OKNewcomerQueued": {barger, true}, "OKOtherKeyNotQueued": {other, false}} {
		t.Run(name, func(t *testing.T) {
			if got := tc.c.cmd.(*decide.Lock).Queued; got != tc.want {
				t.Fatalf("Queued = %v, want %v", got, tc.want)
			}
		})
	}
	p.settle([]*call{head}, []decide.Decision{{Err: nil}})
	p.markQueued([]*call{barger})
	if barger.cmd.(*decide.Lock).Queued {
		t.Fatal("queued once the head was granted and the queue is empty")
	}
}

// TestStopWaits: a writer told to stop answers its parked waits
// partition_unavailable at once, and decides later ones without waiting,
// so its HTTP server's drain is not held by them.
func TestStopWaits(t *testing.T) {
	t.Parallel()
	w, _ := waitWriter(t, Config{InstanceID: "a"})
	ctx := t.Context()
	queue := mustKey(t, "tenant/a/project/b/jobs")
	pop := func() *decide.Queue {
		return &decide.Queue{Header: decide.Header{Key: queue, Op: contract.OpQPop, Principal: "p"}}
	}
	parked := doWait(ctx, w, pop(), 25*time.Second)
	awaitWaiting(t, w, queue, 1)
	w.StopWaits()
	select {
	case got := <-parked:
		if contract.ErrorCode(got.err) != contract.EUnavailable {
			t.Fatalf("parked wait: %v, want partition_unavailable", got.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a parked wait still waits after StopWaits")
	}
	if got := <-doWait(ctx, w, pop(), 25*time.Second); contract.ErrorCode(got.err) != contract.EQueueEmpty || got.took > 10*time.Second {
		t.Fatalf("a wait after StopWaits: %v after %v, want queue_empty at once", got.err, got.took)
	}
}
