package clienttest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestClientQPopRetry: a pop retried with its requestId (as the client
// retries one whose answer was lost) is answered as a replay with the
// item, receipt and deadline the pop took, and takes nothing more: while
// the pop is unprojected (the writer's overlay holds it) and once the
// projection holds it (kv_history does). The replayed receipt
// acknowledges the item.
func TestClientQPopRetry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		opts      []stack.Option
		projected bool
	}{
		{"Unprojected", []stack.Option{stack.WithoutProjector()}, false},
		{"Projected", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stack.MustRun(t, tc.opts...)
			c := client.New(s.URL, stack.DevToken)
			ctx := t.Context()
			queue := "tenant/acme/project/demo/jobs"
			for _, d := range []string{`"a"`, `{"job":"b"}`} {
				if _, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(d)}); err != nil {
					t.Fatal(err)
				}
			}
			pop := func(id string) (client.QueuePop, bool) {
				t.Helper()
				a, replayed, err := client.Call[client.QueuePop](ctx, c, contract.OpQPop, queue, &contract.QPopBody{VisibilityTimeoutSeconds: 60, RequestID: id})
				if err != nil {
					t.Fatalf("qpop %s: %v", id, err)
				}
				return a, replayed
			}
			first, replayed := pop("pop-1")
			if replayed || string(first.Data) != `"a"` || first.Deliveries != 1 || first.Deadline == nil || first.Size != 2 || first.Version != 3 {
				t.Fatalf("qpop: %+v replayed %v", first, replayed)
			}
			if tc.projected {
				if _, err := s.Writer.AwaitProjected(ctx, queue); err != nil {
					t.Fatal(err)
				}
			}
			again, replayed := pop("pop-1")
			if !replayed || string(again.Data) != `"a"` || again.Receipt != first.Receipt || again.Deadline == nil ||
				!again.Deadline.Equal(*first.Deadline) || again.Version != first.Version || again.Size != first.Size {
				t.Fatalf("retry: %+v replayed %v, want the first answer %+v", again, replayed, first)
			}
			next, replayed := pop("pop-2")
			if replayed || string(next.Data) != `{"job":"b"}` || next.Version != 4 {
				t.Fatalf("next qpop: %+v replayed %v, want b", next, replayed)
			}
			if a, err := c.QAck(ctx, queue, again.Receipt); err != nil || !a.Acked || a.Size != 1 {
				t.Fatalf("ack of the replayed receipt: %+v %v", a, err)
			}
		})
	}
}

// TestClientQueueRights: a pop answers data, so a write-only principal
// may not pop (403, nothing taken) and learns no size from a push or an
// ack; a reader may peek and count but not push.
func TestClientQueueRights(t *testing.T) {
	t.Parallel()
	s := stack.MustRun(t)
	ctx := t.Context()
	dev, writer, reader := client.New(s.URL, stack.DevToken), client.New(s.URL, stack.WriterToken), client.New(s.URL, stack.ReaderToken)
	queue := "tenant/acme/project/demo/rights"
	if a, err := writer.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(`1`)}); err != nil || a.Size != 0 || a.Item == "" {
		t.Fatalf("write-only push: %+v %v, want the item without the size", a, err)
	}
	if _, err := writer.QPop(ctx, client.QPopRequest{Key: queue}); contract.ErrorCode(err) != contract.EForbidden {
		t.Fatalf("write-only pop: %v, want forbidden", err)
	}
	if _, err := reader.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(`2`)}); contract.ErrorCode(err) != contract.EForbidden {
		t.Fatalf("read-only push: %v, want forbidden", err)
	}
	if items, err := reader.QPeek(ctx, queue, 10); err != nil || len(items) != 1 || string(items[0].Data) != `1` {
		t.Fatalf("reader peek: %+v %v", items, err)
	}
	p, err := dev.QPop(ctx, client.QPopRequest{Key: queue, Visibility: time.Minute})
	if err != nil || string(p.Data) != `1` {
		t.Fatalf("pop: %+v %v", p, err)
	}
	if a, err := writer.QAck(ctx, queue, p.Receipt); err != nil || !a.Acked || a.Size != 0 {
		t.Fatalf("write-only ack: %+v %v", a, err)
	}
	if sz, err := reader.QSize(ctx, queue); err != nil || sz.Size != 0 {
		t.Fatalf("reader qsize: %+v %v", sz, err)
	}
}

// TestClientQueueKey: a queue is a key like the other collections: a
// plain PUT or a list op on it is wrong_type, a queue op on another
// collection too; DELETE removes the whole queue (its items are not the
// next queue's, and an old receipt is stale); a TTL expires it.
func TestClientQueueKey(t *testing.T) {
	t.Parallel()
	s := stack.MustRun(t)
	c := client.New(s.URL, stack.DevToken)
	ctx := t.Context()
	queue := "tenant/acme/project/demo/q"
	if _, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(`"old"`)}); err != nil {
		t.Fatal(err)
	}
	old, err := c.QPop(ctx, client.QPopRequest{Key: queue, Visibility: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(`"old-2"`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, client.PutRequest{Key: queue, Value: json.RawMessage(`1`)}); contract.ErrorCode(err) != contract.EWrongType {
		t.Fatalf("put over a queue: %v, want wrong_type", err)
	}
	if _, err := c.RPush(ctx, client.PushRequest{Key: queue, Value: json.RawMessage(`1`)}); contract.ErrorCode(err) != contract.EWrongType {
		t.Fatalf("rpush onto a queue: %v, want wrong_type", err)
	}
	if _, err := c.QSize(ctx, "tenant/acme/project/demo/not-a-queue"); err != nil {
		t.Fatalf("qsize of a missing key: %v", err)
	}
	if _, err := c.Delete(ctx, queue, client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.QPop(ctx, client.QPopRequest{Key: queue}); !errors.Is(err, client.ErrQueueEmpty) {
		t.Fatalf("pop of the deleted queue: %v, want queue_empty", err)
	}
	if _, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(`"new"`), TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.QAck(ctx, queue, old.Receipt); !errors.Is(err, client.ErrStaleReceipt) {
		t.Fatalf("ack of the deleted queue's receipt: %v, want stale_receipt", err)
	}
	if items, err := c.QPeek(ctx, queue, 10); err != nil || len(items) != 1 || string(items[0].Data) != `"new"` {
		t.Fatalf("peek of the re-created queue: %+v %v", items, err)
	}
	if sz, err := c.QSize(ctx, queue); err != nil || sz.Size != 1 || sz.InFlight != 0 {
		t.Fatalf("qsize of the re-created queue: %+v %v", sz, err)
	}
	e, err := c.Get(ctx, queue)
	if err != nil || e.Semantics.Purpose != contract.PurposeQueue || e.ExpiresAt == nil {
		t.Fatalf("get of the queue key: %+v %v, want purpose queue with an expiry", e, err)
	}
}

// TestClientQPushItemTTL: ItemTTL must be whole seconds, refused on
// field itemTtlSeconds before any request; the item TTL is part of the
// push's request digest, so a retry with its requestId is a replay while
// the same requestId with another item TTL is a reused one (409); the
// pop answers the item's expiry.
func TestClientQPushItemTTL(t *testing.T) {
	t.Parallel()
	offline := client.New("http://127.0.0.1:1", stack.DevToken)
	for _, d := range []time.Duration{-time.Second, 1500 * time.Millisecond, 10 * 365 * 24 * time.Hour * 2} {
		_, err := offline.QPush(t.Context(), client.QPushRequest{Key: "tenant/acme/project/demo/q", Data: json.RawMessage(`1`), ItemTTL: d})
		var e *contract.Error
		if !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != "itemTtlSeconds" {
			t.Errorf("ItemTTL %v: %v, want invalid on itemTtlSeconds", d, err)
		}
	}
	s := stack.MustRun(t)
	c := client.New(s.URL, stack.DevToken)
	ctx := t.Context()
	push := client.QPushRequest{Key: "tenant/acme/project/demo/ttl-jobs", Data: json.RawMessage(`"a"`), ItemTTL: time.Hour, RequestID: "push-1"}
	first, err := c.QPush(ctx, push)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.QPush(ctx, push); err != nil || again.Item != first.Item || again.Version != first.Version {
		t.Fatalf("retry: %+v %v, want the first push's answer %+v", again, err, first)
	}
	push.ItemTTL = 2 * time.Hour
	if _, err := c.QPush(ctx, push); contract.ErrorCode(err) != contract.EConflict {
		t.Fatalf("requestId reused with another item TTL: %v, want version_conflict", err)
	}
	p, err := c.QPop(ctx, client.QPopRequest{Key: push.Key})
	if err != nil || p.Item != first.Item || p.ExpiresAt == nil || time.Until(*p.ExpiresAt) < 50*time.Minute {
		t.Fatalf("pop: %+v %v, want the item with its expiry an hour on", p, err)
	}
}

// TestClientPopRetryAfterOtherWrites: a pop retried with its requestId
// after other clients wrote the queue or list (pushed and popped) is
// still a replay answering the item or value it took, at its version,
// and takes nothing more: while every event is unprojected (the overlay's
// recentRequests hold the pop) and once the projection holds them
// (kv_history does).
func TestClientPopRetryAfterOtherWrites(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		opts      []stack.Option
		projected bool
	}{
		{"Unprojected", []stack.Option{stack.WithoutProjector()}, false},
		{"Projected", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stack.MustRun(t, tc.opts...)
			c, other := client.New(s.URL, stack.DevToken), client.New(s.URL, stack.DevToken)
			ctx := t.Context()
			queue, list := "tenant/acme/project/demo/busy-q", "tenant/acme/project/demo/busy-l"
			for _, d := range []string{`"a"`, `"b"`} {
				if _, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(d)}); err != nil {
					t.Fatal(err)
				}
				if _, err := c.RPush(ctx, client.PushRequest{Key: list, Value: json.RawMessage(d)}); err != nil {
					t.Fatal(err)
				}
			}
			qpop := func(id string) (client.QueuePop, bool) {
				t.Helper()
				a, replayed, err := client.Call[client.QueuePop](ctx, c, contract.OpQPop, queue, &contract.QPopBody{VisibilityTimeoutSeconds: 60, RequestID: id})
				if err != nil {
					t.Fatalf("qpop %s: %v", id, err)
				}
				return a, replayed
			}
			lpop := func(id string) (client.ListChange, bool) {
				t.Helper()
				a, replayed, err := client.Call[client.ListChange](ctx, c, contract.OpLPop, list, &contract.PopBody{RequestID: id})
				if err != nil {
					t.Fatalf("lpop %s: %v", id, err)
				}
				return a, replayed
			}
			firstQ, _ := qpop("pop-1")
			firstL, _ := lpop("pop-1")
			// Other clients write both after the pops: a push and a pop each.
			if _, err := other.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(`"c"`)}); err != nil {
				t.Fatal(err)
			}
			if p, err := other.QPop(ctx, client.QPopRequest{Key: queue, Visibility: time.Minute}); err != nil || string(p.Data) != `"b"` {
				t.Fatalf("other qpop: %+v %v, want b", p, err)
			}
			if _, err := other.RPush(ctx, client.PushRequest{Key: list, Value: json.RawMessage(`"c"`)}); err != nil {
				t.Fatal(err)
			}
			if p, err := other.LPop(ctx, list); err != nil || string(p.Value) != `"b"` {
				t.Fatalf("other lpop: %+v %v, want b", p, err)
			}
			if tc.projected {
				for _, k := range []string{queue, list} {
					if _, err := s.Writer.AwaitProjected(ctx, k); err != nil {
						t.Fatal(err)
					}
				}
			}
			againQ, replayed := qpop("pop-1")
			if !replayed || string(againQ.Data) != `"a"` || againQ.Item != firstQ.Item || againQ.Receipt != firstQ.Receipt ||
				againQ.Deliveries != firstQ.Deliveries || againQ.Deadline == nil || !againQ.Deadline.Equal(*firstQ.Deadline) ||
				againQ.Version != firstQ.Version || againQ.Size != firstQ.Size {
				t.Fatalf("qpop retry: %+v replayed %v, want the first answer %+v", againQ, replayed, firstQ)
			}
			againL, replayed := lpop("pop-1")
			if !replayed || string(againL.Value) != `"a"` || againL.Version != firstL.Version || againL.Length != firstL.Length {
				t.Fatalf("lpop retry: %+v replayed %v, want the first answer %+v", againL, replayed, firstL)
			}
			// The retries took nothing: c is next in both, and the
			// replayed receipt acknowledges a.
			if sz, err := c.QSize(ctx, queue); err != nil || sz.Size != 3 || sz.InFlight != 2 {
				t.Fatalf("qsize after the retry: %+v %v, want 3 with 2 in flight", sz, err)
			}
			if a, err := c.QAck(ctx, queue, againQ.Receipt); err != nil || !a.Acked {
				t.Fatalf("ack of the replayed receipt: %+v %v", a, err)
			}
			if next, replayed := lpop("pop-2"); replayed || string(next.Value) != `"c"` || next.Length != 0 {
				t.Fatalf("next lpop: %+v replayed %v, want c", next, replayed)
			}
		})
	}
}
