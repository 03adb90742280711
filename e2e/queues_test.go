package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
	inproc "github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/writer"
)

// TestQueueExactlyOnce: 4 producers push 10,000 items into one queue
// while 8 consumers pop them with a visibility timeout and acknowledge
// each. Every item is processed exactly once (by the consumers' own
// count), and the log agrees: each push's item was popped once (into
// flight, delivery 1) and acknowledged once, nothing was requeued, the
// queue's versions are contiguous, and it ends empty with nothing in
// flight.
func TestQueueExactlyOnce(t *testing.T) {
	t.Parallel()
	// Service processes, built without the race detector (a third less
	// of CI's CPU for 30,000 operations); the in-process queue tests
	// below keep the detector on the same paths.
	s := mustProcStack(t).stack
	c := client.New(s.url, devToken)
	ctx := t.Context()
	queue := "tenant/acme/project/demo/queues/tasks"
	const producers, consumers = 4, 8
	items := 10000
	if testing.Short() {
		items = 1000
	}
	var (
		wg       sync.WaitGroup
		pushed   atomic.Bool
		mu       sync.Mutex
		seen     = make(map[int]int, items)
		receipts = make(map[string]bool, items)
	)
	for p := range producers {
		wg.Go(func() {
			for i := p; i < items; i += producers {
				if _, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
					t.Errorf("push %d: %v", i, err)
					return
				}
			}
		})
	}
	var consumed sync.WaitGroup
	for range consumers {
		consumed.Go(func() {
			for !t.Failed() {
				a, err := c.QPop(ctx, client.QPopRequest{Key: queue, Visibility: time.Minute})
				if errors.Is(err, client.ErrQueueEmpty) {
					if pushed.Load() {
						return
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if err != nil {
					t.Errorf("pop: %v", err)
					return
				}
				var d struct{ N int }
				if err := json.Unmarshal(a.Data, &d); err != nil {
					t.Errorf("item %s: %v", a.Data, err)
					return
				}
				mu.Lock()
				seen[d.N]++
				receipts[a.Receipt] = true
				mu.Unlock()
				if _, err := c.QAck(ctx, queue, a.Receipt); err != nil {
					t.Errorf("ack %s: %v", a.Receipt, err)
					return
				}
			}
		})
	}
	wg.Wait()
	pushed.Store(true)
	consumed.Wait()
	if t.Failed() {
		return
	}
	for i := range items {
		if seen[i] != 1 {
			t.Fatalf("item %d processed %d times, want exactly once", i, seen[i])
		}
	}
	if sz, err := c.QSize(ctx, queue); err != nil || sz.Size != 0 || sz.InFlight != 0 {
		t.Fatalf("qsize after: %+v %v, want 0 and 0 in flight", sz, err)
	}
	checkQueueLog(t, s, queue, items, receipts)
}

// checkQueueLog folds the queue's events of the log: versions
// contiguous, every pushed item popped once (into flight, delivery 1,
// with a receipt a consumer got) and acknowledged once, nothing
// requeued.
func checkQueueLog(t *testing.T, s *stack, queue string, items int, receipts map[string]bool) {
	t.Helper()
	type life struct{ pushes, pops, acks int }
	lives := make(map[string]*life, items)
	var next int64 = 1
	for _, e := range s.readLog(t.Context()) {
		if e.Key != queue {
			continue
		}
		if e.Version != next {
			t.Fatalf("queue event version %d, want %d (contiguous)", e.Version, next)
		}
		next++
		el := e.Element
		if el == nil {
			t.Fatalf("queue event %d (%s) has no element", e.Version, e.Op)
		}
		l := lives[el.Member]
		if l == nil {
			l = &life{}
			lives[el.Member] = l
		}
		switch e.Op {
		case contract.OpQPush:
			l.pushes++
		case contract.OpQPop:
			l.pops++
			if el.State != decide.ItemInFlight || el.Deliveries != 1 || !receipts[contract.Receipt(el.Member, el.Deliveries, el.ReceiptNonce)] {
				t.Fatalf("pop of %s: %+v, want in flight at delivery 1 with a receipt a consumer got", el.Member, el)
			}
		case contract.OpQAck:
			l.acks++
			if el.State != "" || el.Op != contract.ElementRemove {
				t.Fatalf("ack of %s: %+v, want the row removed", el.Member, el)
			}
		default:
			t.Fatalf("queue event %d: op %s, want only pushes, pops and acks", e.Version, e.Op)
		}
	}
	if len(lives) != items {
		t.Fatalf("the log names %d items, want %d", len(lives), items)
	}
	for m, l := range lives {
		if *l != (life{1, 1, 1}) {
			t.Fatalf("item %s: %d pushes, %d pops, %d acks in the log, want one each", m, l.pushes, l.pops, l.acks)
		}
	}
}

// TestQueueVisibilityTimeout: an item popped with a 1 s visibility
// timeout and not acknowledged comes back (the writer's sweeper, every
// 100 ms here, requeues it), is delivered again with deliveries 2, and
// its first receipt is refused (409 stale_receipt) while the second is
// accepted; the ack removes it. With the projector stopped too: the
// sweeper then finds the in-flight item in the writer's overlay.
func TestQueueVisibilityTimeout(t *testing.T) {
	t.Parallel()
	sweep := inproc.WriterConfig(func(c *writer.Config) { c.SweepInterval = 100 * time.Millisecond })
	t.Run("Projected", func(t *testing.T) { queueVisibilityTimeout(t, mustStack(t, sweep)) })
	t.Run("Unprojected", func(t *testing.T) { queueVisibilityTimeout(t, mustStack(t, sweep, inproc.WithoutProjector())) })
}

func queueVisibilityTimeout(t *testing.T, s *stack) {
	c := client.New(s.url, devToken)
	ctx := t.Context()
	queue := "tenant/acme/project/demo/queues/visibility"
	if _, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(`"job-1"`)}); err != nil {
		t.Fatal(err)
	}
	first, err := c.QPop(ctx, client.QPopRequest{Key: queue, Visibility: time.Second})
	if err != nil || first.Deliveries != 1 || first.Deadline == nil || first.VisibilityTimeout != 1 {
		t.Fatalf("first pop: %+v %v, want delivery 1 with a deadline", first, err)
	}
	if _, err := c.QPop(ctx, client.QPopRequest{Key: queue}); !errors.Is(err, client.ErrQueueEmpty) {
		t.Fatalf("pop while the item is in flight: %v, want queue_empty", err)
	}
	var second client.QueuePop
	deadline := time.Now().Add(30 * time.Second)
	for {
		second, err = c.QPop(ctx, client.QPopRequest{Key: queue, Visibility: 30 * time.Second})
		if err == nil {
			break
		}
		if !errors.Is(err, client.ErrQueueEmpty) || time.Now().After(deadline) {
			t.Fatalf("pop after the timeout: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if second.Item != first.Item || second.Deliveries != 2 || string(second.Data) != `"job-1"` || second.Receipt == first.Receipt {
		t.Fatalf("redelivery %+v, want item %s at delivery 2 with a new receipt", second, first.Item)
	}
	_, err = c.QAck(ctx, queue, first.Receipt)
	var e *contract.Error
	if !errors.Is(err, client.ErrStaleReceipt) || !errors.As(err, &e) || e.Field != "receipt" {
		t.Fatalf("ack of the first receipt: %v, want stale_receipt on field receipt", err)
	}
	if sz, _ := c.QSize(ctx, queue); sz.Size != 1 || sz.InFlight != 1 {
		t.Fatalf("qsize after the stale ack: %+v, want the item still in flight", sz)
	}
	if a, err := c.QAck(ctx, queue, second.Receipt); err != nil || !a.Acked || a.Size != 0 {
		t.Fatalf("ack of the second receipt: %+v %v", a, err)
	}
	if _, err := c.QAck(ctx, queue, second.Receipt); !errors.Is(err, client.ErrStaleReceipt) {
		t.Fatalf("second ack of the same receipt: %v, want stale_receipt", err)
	}
	if sz, err := c.QSize(ctx, queue); err != nil || sz.Size != 0 || sz.InFlight != 0 {
		t.Fatalf("qsize at the end: %+v %v", sz, err)
	}
}

// TestQueuePriorityFIFO: items pushed with mixed priorities are served
// lowest priority first and first in, first out within a priority, by
// pops and by peek, across a batch of concurrent pops too; also with the
// projector stopped (every item then lives in the writer's overlay only).
func TestQueuePriorityFIFO(t *testing.T) {
	t.Parallel()
	t.Run("Projected", func(t *testing.T) { queuePriorityFIFO(t, mustStack(t), true) })
	t.Run("Unprojected", func(t *testing.T) { queuePriorityFIFO(t, mustStack(t, inproc.WithoutProjector()), false) })
}

func queuePriorityFIFO(t *testing.T, s *stack, projected bool) {
	c := client.New(s.url, devToken)
	ctx := t.Context()
	queue := "tenant/acme/project/demo/queues/priorities"
	prios := []int64{5, 0, -3, 5, 1000000000, 0, -3, -1000000000, 1, 0}
	type want struct {
		prio int64
		i    int
	}
	var order []want
	for i, p := range prios {
		if a, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(fmt.Sprint(i)), Priority: p}); err != nil || a.Priority != p {
			t.Fatalf("push %d: %+v %v", i, a, err)
		}
		order = append(order, want{p, i})
	}
	// Expected: stable sort by priority.
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && order[j].prio < order[j-1].prio; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	if projected { // peek waits for the projector
		peek, err := c.QPeek(ctx, queue, 1000)
		if err != nil || len(peek) != len(prios) {
			t.Fatalf("peek: %+v %v", peek, err)
		}
		for k, it := range peek {
			if string(it.Data) != fmt.Sprint(order[k].i) || it.Priority != order[k].prio {
				t.Fatalf("peek[%d] = %s (priority %d), want %d (priority %d)", k, it.Data, it.Priority, order[k].i, order[k].prio)
			}
		}
	}
	for k := range order {
		a, err := c.QPop(ctx, client.QPopRequest{Key: queue})
		if err != nil || string(a.Data) != fmt.Sprint(order[k].i) || a.Priority != order[k].prio {
			t.Fatalf("pop %d: %+v %v, want %d (priority %d)", k, a, err, order[k].i, order[k].prio)
		}
	}
	if _, err := c.QPop(ctx, client.QPopRequest{Key: queue}); !errors.Is(err, client.ErrQueueEmpty) {
		t.Fatalf("pop of the empty queue: %v", err)
	}
	// Concurrent pops of one queue (decided in shared batches) take
	// distinct items, all of them.
	for i := range 200 {
		if _, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(fmt.Sprint(i)), Priority: int64(i % 3)}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got = map[string]int{}
	)
	for range 16 {
		wg.Go(func() {
			for {
				a, err := c.QPop(ctx, client.QPopRequest{Key: queue})
				if errors.Is(err, client.ErrQueueEmpty) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[string(a.Data)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != 200 {
		t.Fatalf("concurrent pops took %d distinct items, want 200", len(got))
	}
	for d, n := range got {
		if n != 1 {
			t.Fatalf("item %s popped %d times", d, n)
		}
	}
}

// TestQueueDedup: a push repeating a dedupId within the window (2 s
// here) adds nothing: the answer is deduplicated with the first push's
// item, the size and version are unchanged, also once the first item
// was popped (it is kept as done for the window). After the window the
// same dedupId adds a new item.
func TestQueueDedup(t *testing.T) {
	t.Parallel()
	s := mustStack(t, inproc.WriterConfig(func(c *writer.Config) { c.QueueDedupWindow = 2 * time.Second }))
	c := client.New(s.url, devToken)
	ctx := t.Context()
	queue := "tenant/acme/project/demo/queues/dedup"
	push := func(data string) client.QueuePush {
		t.Helper()
		a, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(data), DedupID: "msg-42"})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	first := push(`"a"`)
	if first.Deduplicated || first.Size != 1 {
		t.Fatalf("first push: %+v", first)
	}
	again := push(`"b"`)
	if !again.Deduplicated || again.Item != first.Item || again.Size != 1 || again.Version != first.Version {
		t.Fatalf("repeated push: %+v, want deduplicated into %+v", again, first)
	}
	if p, err := c.QPop(ctx, client.QPopRequest{Key: queue}); err != nil || string(p.Data) != `"a"` {
		t.Fatalf("pop: %+v %v", p, err)
	}
	if a := push(`"c"`); !a.Deduplicated || a.Item != first.Item || a.Size != 0 {
		t.Fatalf("push after the pop, within the window: %+v, want deduplicated", a)
	}
	deadline := time.Now().Add(30 * time.Second)
	var later client.QueuePush
	for {
		time.Sleep(200 * time.Millisecond)
		if later = push(`"d"`); !later.Deduplicated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dedupId still deduplicates after the window")
		}
	}
	if later.Item == first.Item || later.Size != 1 {
		t.Fatalf("push after the window: %+v, want a new item", later)
	}
	if p, err := c.QPop(ctx, client.QPopRequest{Key: queue}); err != nil || string(p.Data) != `"d"` {
		t.Fatalf("pop of the new item: %+v %v", p, err)
	}
}

// TestRebuildKeepsQueueItems: after pushes, pops in flight and removed,
// acks, a redelivery and a delete and re-create, the topic is compacted
// (each item keeps its latest event, which carries its whole state) and
// a projection rebuilt from it equals the live one, items included
// (projector diff, column elements), and serves the same items.
func TestRebuildKeepsQueueItems(t *testing.T) {
	t.Parallel()
	s := mustStack(t, inproc.WriterConfig(func(c *writer.Config) { c.SweepInterval = 100 * time.Millisecond }))
	c := client.New(s.url, devToken)
	ctx := t.Context()
	const a, b = "tenant/t0/project/p/queues/a", "tenant/t1/project/p/queues/b"
	push := func(q string, i int, prio int64) {
		t.Helper()
		if _, err := c.QPush(ctx, client.QPushRequest{Key: q, Data: json.RawMessage(fmt.Sprint(i)), Priority: prio, DedupID: fmt.Sprint("d", i%4)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 {
		push(a, i, int64(i%3))
	}
	pop := func(q string, vis time.Duration) client.QueuePop {
		t.Helper()
		p, err := c.QPop(ctx, client.QPopRequest{Key: q, Visibility: vis})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pop(a, 0)
	acked := pop(a, time.Minute)
	pop(a, time.Minute) // stays in flight
	expiring := pop(a, time.Second)
	if _, err := c.QAck(ctx, a, acked.Receipt); err != nil {
		t.Fatal(err)
	}
	push(b, 100, 0)
	push(b, 101, 0)
	if _, err := c.Delete(ctx, b, client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	push(b, 102, 0)
	// Wait for the redelivery of the expiring item.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		items, err := c.QPeek(ctx, a, 100)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(items, func(it client.QueueItem) bool { return it.Item == expiring.Item && it.Deliveries == 1 }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expiring item was not requeued")
		}
	}
	waitProjected(t, s)
	s.broker.Cluster.Compact()
	rebuilt := projection.New(s.pg.MustSchema(t, "rebuilt"))
	if _, err := projector.Rebuild(ctx, projector.RebuildConfig{
		Brokers: s.broker.Addrs, Topic: s.broker.Topics.Changes, Partitions: s.broker.Topics.Partitions,
	}, rebuilt, nil); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	d, err := projection.Compare(ctx, s.pg.Pool, projection.DiffSpec{Schema: "rebuilt", Against: "public", Topic: s.broker.Topics.Changes, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Equal() || d.NotCompared != 0 || d.Entries != 2 {
		t.Fatalf("diff %+v, keys %+v; want equal over 2 queues", d, d.Keys)
	}
	for _, q := range []string{a, b} {
		live, _, err := s.store.Peek(ctx, q, 100, 1<<20, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := rebuilt.Peek(ctx, q, 100, 1<<20, time.Now())
		if err != nil || !reflect.DeepEqual(live, again) || len(live) == 0 {
			t.Fatalf("peek of %s: live %+v, rebuilt %+v (%v)", q, live, again, err)
		}
	}
}
