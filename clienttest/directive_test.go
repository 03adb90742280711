package clienttest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestClientDirective: WithDirective names the directive of every write
// of a client, DirectiveContext overrides it for a call; a watch shows
// each event's directive, and a bad directive is refused (400 naming the
// header) with nothing written.
func TestClientDirective(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.AcmeToken, client.WithDirective("nightly-sync"))
	const k = scope + "directive/k"
	ctx := t.Context()
	if _, err := c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(client.DirectiveContext(ctx, "backfill.2026"), client.PutRequest{Key: k, Value: json.RawMessage(`2`)}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Put(client.DirectiveContext(ctx, "not valid!"), client.PutRequest{Key: k, Value: json.RawMessage(`3`)})
	var e *contract.Error
	if !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != contract.DirectiveHeader {
		t.Fatalf("a bad directive: %v, want invalid naming %s", err, contract.DirectiveHeader)
	}
	var got []string
	for ev, err := range c.Watch(ctx, client.WatchOptions{Key: k, FromVersion: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Directive)
		if len(got) == 2 {
			break
		}
	}
	if got[0] != "nightly-sync" || got[1] != "backfill.2026" {
		t.Fatalf("watched directives %q, want nightly-sync then backfill.2026", got)
	}
	if e, err := c.Get(ctx, k); err != nil || e.Version != 2 {
		t.Fatalf("after the refused write: version %d (%v), want 2", e.Version, err)
	}
}
