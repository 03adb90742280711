package clienttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestUpdateDeadLetter: an update whose every attempt loses to another
// writer exhausts its (shortened) conflict schedule and is handed to the
// dead-letter queue it names: exactly one item, with its key, the last
// write's requestId, attempts, the last error, the time it gave up and
// the client's directive, and no value unless asked for. Run again with
// the same RequestID, it escalates at the same attempt and pushes
// nothing more (the push's requestId is the write's). A triage worker
// pops the items.
func TestUpdateDeadLetter(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.AcmeToken, client.WithDirective("cursor-sync"), client.WithRetryPolicy(client.RetryPolicy{
		ConflictBase: 5 * time.Millisecond, ConflictCap: 20 * time.Millisecond})) // 4 attempts: waits of 5, 10 and 20 ms
	other := client.New(url, stack.DevToken)
	const (
		k     = scope + "deadletter/cursor"
		queue = scope + "deadletter/triage"
	)
	// Every attempt's read is followed by another writer's write, so
	// every attempt's compare-and-swap fails.
	interfered := func(cur *contract.Entry) (json.RawMessage, error) {
		if _, err := other.Put(t.Context(), client.PutRequest{Key: k, Value: json.RawMessage(`"theirs"`)}); err != nil {
			return nil, err
		}
		return json.RawMessage(`{"cursor":"mine"}`), nil
	}
	update := func(t *testing.T, o client.UpdateOptions) *client.EscalationError {
		t.Helper()
		start := time.Now()
		_, err := c.Update(t.Context(), k, interfered, o)
		var esc *client.EscalationError
		if !errors.As(err, &esc) || esc.Attempts != 4 || contract.ErrorCode(err) != contract.EConflict || esc.DeadLetter != queue {
			t.Fatalf("update: %v; want an escalated conflict after 4 attempts handed to %s", err, queue)
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("the update took %v: the short schedule was not used", time.Since(start))
		}
		return esc
	}
	start := time.Now().UTC()
	update(t, client.UpdateOptions{RequestID: "dl-1", DeadLetter: queue})

	t.Run("OKOneItemWithoutValue", func(t *testing.T) {
		items, err := c.QPeek(t.Context(), queue, 10)
		if err != nil || len(items) != 1 {
			t.Fatalf("queue holds %d items (%v), want 1", len(items), err)
		}
		if bytes.Contains(items[0].Data, []byte(`"value"`)) {
			t.Fatalf("the item holds a value unasked: %s", items[0].Data)
		}
		d := decodeDeadLetter(t, items[0].Data)
		if d.Key != k || d.RequestID != "dl-1-4" || d.Attempts != 4 || d.LastError.Code != contract.EConflict || d.LastError.Message == "" ||
			d.EscalatedAt.Before(start) || d.EscalatedAt.After(time.Now().Add(time.Minute)) || d.Directive != "cursor-sync" {
			t.Fatalf("item %+v", d)
		}
	})
	t.Run("OKRunAgainPushesNothing", func(t *testing.T) {
		update(t, client.UpdateOptions{RequestID: "dl-1", DeadLetter: queue})
		if n, err := c.QSize(t.Context(), queue); err != nil || n.Size != 1 {
			t.Fatalf("queue size %d (%v) after the same update escalated again, want 1", n.Size, err)
		}
	})
	t.Run("OKValueWhenAsked", func(t *testing.T) {
		update(t, client.UpdateOptions{RequestID: "dl-2", DeadLetter: queue, DeadLetterValue: true})
		items, err := c.QPeek(t.Context(), queue, 10)
		if err != nil || len(items) != 2 {
			t.Fatalf("queue holds %d items (%v), want 2", len(items), err)
		}
		if d := decodeDeadLetter(t, items[1].Data); d.RequestID != "dl-2-4" || string(d.Value) != `{"cursor":"mine"}` {
			t.Fatalf("item %+v, want requestId dl-2-4 and the computed value", d)
		}
	})
	t.Run("OKTriageWorkerPops", func(t *testing.T) {
		var got []string
		for {
			p, err := c.QPop(t.Context(), client.QPopRequest{Key: queue})
			if errors.Is(err, client.ErrQueueEmpty) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, decodeDeadLetter(t, p.Data).RequestID)
		}
		if len(got) != 2 || got[0] != "dl-1-4" || got[1] != "dl-2-4" {
			t.Fatalf("the worker took %v, want [dl-1-4 dl-2-4]", got)
		}
	})
	t.Run("OKNoQueueNoPush", func(t *testing.T) {
		_, err := c.Update(t.Context(), k, interfered, client.UpdateOptions{RequestID: "dl-3"})
		var esc *client.EscalationError
		if !errors.As(err, &esc) || esc.DeadLetter != "" {
			t.Fatalf("update without a queue: %v", err)
		}
		if n, err := c.QSize(t.Context(), queue); err != nil || n.Size != 0 {
			t.Fatalf("queue size %d (%v), want 0", n.Size, err)
		}
	})
}

func decodeDeadLetter(t *testing.T, data json.RawMessage) client.DeadLetter {
	t.Helper()
	var d client.DeadLetter
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return d
}
