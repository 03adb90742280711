package clienttest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestClientReadsAt: Get and ListAll with At (a watch event's cursor)
// and AtTime read the past: the key as its first write left it, a
// listing paged by one at that point; a position of the past where the
// key was absent is contract.ENotFound, a time in the future
// contract.EInvalid on "at".
func TestClientReadsAt(t *testing.T) {
	t.Parallel()
	c := client.New(stack.MustStart(t), stack.DevToken)
	ctx := t.Context()
	const prefix = "tenant/acme/project/demo/client-at/"
	for _, k := range []string{"a", "b"} {
		if _, err := c.Put(ctx, client.PutRequest{Key: prefix + k, Value: json.RawMessage(`1`)}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond)
	then := time.Now()
	time.Sleep(10 * time.Millisecond)
	if _, err := c.Put(ctx, client.PutRequest{Key: prefix + "a", Value: json.RawMessage(`2`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, prefix+"b", client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var first contract.Cursor
	for ev, err := range c.Watch(ctx, client.WatchOptions{Key: prefix + "a", FromVersion: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		if first, err = contract.ParseCursor(ev.Cursor, "cursor"); err != nil {
			t.Fatal(err)
		}
		break
	}
	for _, opt := range []client.ReadOption{client.At(first), client.AtTime(then)} {
		e, err := c.Get(ctx, prefix+"a", opt)
		if err != nil || string(e.Value) != "1" || e.Version != 1 {
			t.Fatalf("Get at the first write: %+v, %v", e, err)
		}
	}
	var got []string
	for e, err := range c.ListAll(ctx, client.ListOptions{Prefix: prefix, Limit: 1}, client.AtTime(then)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s=%s", strings.TrimPrefix(e.Key, prefix), e.Value))
	}
	if strings.Join(got, " ") != "a=1 b=1" {
		t.Fatalf("ListAll at then: %v", got)
	}
	if _, err := c.Get(ctx, prefix+"b", client.At(first)); contract.ErrorCode(err) != contract.ENotFound {
		t.Fatalf("Get b at a's first write (b was written after): %v", err)
	}
	if _, err := c.Get(ctx, prefix+"a", client.AtTime(time.Now().Add(time.Hour))); contract.ErrorCode(err) != contract.EInvalid {
		t.Fatalf("Get in the future: %v", err)
	}
}
