package e2e

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	inproc "github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/writer"
)

// TestQueueItemTTL: items pushed with a 1 s item TTL beside items
// without one. With the sweeper off, once the TTL passed, pops serve only
// the unexpired items (then queue_empty) while size still counts the
// expired ones (the documented rule: size counts them until the
// sweeper's qexpire); with the projector stopped too, where the items
// live in the writer's overlay only. With a 100 ms sweep, the sweeper
// removes the expired items, a ready one and one in flight (size and
// inFlight drop, one qexpire each in the log), the in-flight one's
// receipt is then refused (stale_receipt), and an expired item with a
// dedupId is kept done so a repeated push within the window adds nothing.
func TestQueueItemTTL(t *testing.T) {
	t.Parallel()
	noSweep := inproc.WriterConfig(func(c *writer.Config) { c.SweepInterval = -1 })
	t.Run("PopSkipsExpiredProjected", func(t *testing.T) { queueItemTTLSkip(t, mustStack(t, noSweep)) })
	t.Run("PopSkipsExpiredUnprojected", func(t *testing.T) { queueItemTTLSkip(t, mustStack(t, noSweep, inproc.WithoutProjector())) })
	sweep := inproc.WriterConfig(func(c *writer.Config) { c.SweepInterval = 100 * time.Millisecond })
	t.Run("SweeperRemovesProjected", func(t *testing.T) { queueItemTTLSweep(t, mustStack(t, sweep)) })
	t.Run("SweeperRemovesUnprojected", func(t *testing.T) { queueItemTTLSweep(t, mustStack(t, sweep, inproc.WithoutProjector())) })
}

// pushItems pushes data[i] with an item TTL of ttl[i] seconds (0: none)
// and returns the items' ids.
func pushItems(t *testing.T, c *client.Client, queue string, data []string, ttl []int) []string {
	t.Helper()
	ids := make([]string, len(data))
	for i, d := range data {
		r := client.QPushRequest{Key: queue, Data: json.RawMessage(d), ItemTTL: time.Duration(ttl[i]) * time.Second}
		a, err := c.QPush(t.Context(), r)
		if err != nil {
			t.Fatalf("push %s: %v", d, err)
		}
		ids[i] = a.Item
	}
	return ids
}

func queueItemTTLSkip(t *testing.T, s *stack) {
	c := client.New(s.url, devToken)
	ctx := t.Context()
	queue := "tenant/acme/project/demo/queues/itemttl"
	pushItems(t, c, queue, []string{`"a"`, `"b"`, `"c"`, `"d"`, `"e"`}, []int{3600, 1, 0, 1, 0})
	pushedBy := time.Now()
	first, err := c.QPop(ctx, client.QPopRequest{Key: queue, Visibility: 30 * time.Second})
	if err != nil || string(first.Data) != `"a"` || first.ExpiresAt == nil || time.Until(*first.ExpiresAt) < 50*time.Minute {
		t.Fatalf("pop: %+v %v, want a with its expiry an hour on", first, err)
	}
	if _, err := c.QAck(ctx, queue, first.Receipt); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(pushedBy.Add(1200 * time.Millisecond))) // b's and d's TTL passed
	var served []string
	for {
		p, err := c.QPop(ctx, client.QPopRequest{Key: queue})
		if errors.Is(err, client.ErrQueueEmpty) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		served = append(served, string(p.Data))
	}
	if len(served) != 2 || served[0] != `"c"` || served[1] != `"e"` {
		t.Fatalf("served %v after the TTL, want c and e only", served)
	}
	if sz, err := c.QSize(ctx, queue); err != nil || sz.Size != 2 || sz.InFlight != 0 {
		t.Fatalf("qsize %+v %v, want 2: the expired b and d count until a sweep removes them", sz, err)
	}
}

func queueItemTTLSweep(t *testing.T, s *stack) {
	c := client.New(s.url, devToken)
	ctx := t.Context()
	queue := "tenant/acme/project/demo/queues/itemttl"
	// The item taken in flight has 2 s, so the pop comes before its TTL
	// ends even on a loaded machine.
	ids := pushItems(t, c, queue, []string{`"flying"`}, []int{2})
	p, err := c.QPop(ctx, client.QPopRequest{Key: queue, Visibility: 30 * time.Second})
	if err != nil || p.Item != ids[0] {
		t.Fatalf("pop: %+v %v, want the first item in flight", p, err)
	}
	ids = append(ids, pushItems(t, c, queue, []string{`"ready"`, `"kept"`}, []int{1, 0})...)
	if _, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(`"dedup"`), DedupID: "job-9", ItemTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		sz, err := c.QSize(ctx, queue)
		if err != nil {
			t.Fatal(err)
		}
		if sz.Size == 1 && sz.InFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("qsize %+v 30 s on, want 1 and none in flight after the sweeper's expiries", sz)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = c.QAck(ctx, queue, p.Receipt)
	var e *contract.Error
	if !errors.Is(err, client.ErrStaleReceipt) || !errors.As(err, &e) || e.Field != "receipt" {
		t.Fatalf("ack of the expired in-flight item: %v, want stale_receipt on field receipt", err)
	}
	if a, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(`"again"`), DedupID: "job-9"}); err != nil || !a.Deduplicated {
		t.Fatalf("push repeating the expired item's dedupId: %+v %v, want deduplicated", a, err)
	}
	if got, err := c.QPop(ctx, client.QPopRequest{Key: queue}); err != nil || string(got.Data) != `"kept"` {
		t.Fatalf("pop: %+v %v, want the item without a TTL", got, err)
	}
	checkExpiries(t, s, queue, ids[:2])
}

// checkExpiries checks the log holds one qexpire of each of ids, by the
// sweeper, removing the item, and one keeping the deduped item done.
func checkExpiries(t *testing.T, s *stack, queue string, ids []string) {
	t.Helper()
	removed, done := map[string]int{}, 0
	for _, e := range s.readLog(t.Context()) {
		if e.Key != queue || e.Op != contract.OpQExpire {
			continue
		}
		switch el := e.Element; {
		case e.Principal != writer.SweeperPrincipal || el == nil:
			t.Fatalf("qexpire %+v, want the sweeper's with the item", e)
		case el.State == decide.ItemDone && el.DedupID == "job-9":
			done++
		case el.State == "" && el.Op == contract.ElementRemove && el.ExpiresAt != nil:
			removed[el.Member]++
		default:
			t.Fatalf("qexpire element %+v, want removed or done", el)
		}
	}
	if len(removed) != len(ids) || removed[ids[0]] != 1 || removed[ids[1]] != 1 || done != 1 {
		t.Fatalf("qexpires removed %v and kept %d done, want one each of %v and one done", removed, done, ids)
	}
}
