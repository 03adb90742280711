package clienttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// watchN collects the first n events of a watch, started in the
// background; it returns once the stack serves the watch, and the
// returned function waits for the n events.
func watchN(t *testing.T, st *stack.Stack, c *client.Client, o client.WatchOptions, n int) func() []contract.WatchEvent {
	t.Helper()
	before := st.Watches.Watches()
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan []contract.WatchEvent, 1)
	errs := make(chan error, 1)
	var received atomic.Bool
	go func() {
		var evs []contract.WatchEvent
		for ev, err := range c.Watch(ctx, o) {
			if err != nil {
				errs <- err
				return
			}
			received.Store(true)
			if evs = append(evs, ev); len(evs) == n {
				break
			}
		}
		got <- evs
	}()
	stack.WaitFor(t, "the watch to start", func() bool { return received.Load() || st.Watches.Watches() > before })
	return func() []contract.WatchEvent {
		t.Helper()
		defer func() {
			cancel()
			stack.WaitFor(t, "the watch to end", func() bool { return st.Watches.Watches() == before })
		}()
		select {
		case evs := <-got:
			return evs
		case err := <-errs:
			t.Fatalf("watch %+v: %v", o, err)
		}
		return nil
	}
}

func describe(evs []contract.WatchEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%s@%d %s/%s %s", e.Key, e.Version, e.Kind, e.Op, e.Value)
	}
	return out
}

// TestWatch follows a prefix through puts, an increment, a delete and a
// set's members, skipping another prefix; then resumes after a cursor
// and starts from a key's version.
func TestWatch(t *testing.T) {
	t.Parallel()
	st := stack.MustRun(t)
	c := client.New(st.URL, stack.DevToken)
	ctx := t.Context()
	const w = scope + "watched/"
	wait := watchN(t, st, c, client.WatchOptions{Prefix: w}, 6)
	put := func(key, value string) {
		t.Helper()
		if _, err := c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(value)}); err != nil {
			t.Fatal(err)
		}
	}
	put(w+"a", `{"n":1}`)
	put(scope+"other/a", `"not watched"`)
	put(w+"b", `"two"`)
	if _, err := c.Increment(ctx, client.IncrementRequest{Key: w + "c", Create: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, w+"a", client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SAdd(ctx, client.SetRequest{Key: w + "s", Member: "m1"}); err != nil {
		t.Fatal(err)
	}
	put(w+"a", `{"n":3}`)
	evs := wait()
	want := []string{
		w + `a@1 put/set {"n":1}`,
		w + `b@1 put/set "two"`,
		w + `c@1 put/increment 1`,
		w + `a@2 delete/delete `,
		w + `s@1 put/sadd {"type":"set","size":1,"since":1}`,
		w + `a@3 put/set {"n":3}`,
	}
	if got := describe(evs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events:\n%q\nwant\n%q", got, want)
	}
	if evs[4].Element == nil || evs[4].Element.Member != "m1" || evs[0].Principal != "dev" || evs[0].Time.IsZero() {
		t.Errorf("event details: %+v %+v", evs[4], evs[0])
	}

	t.Run("AfterCursor", func(t *testing.T) {
		got := watchN(t, st, c, client.WatchOptions{Prefix: w, After: evs[2].Cursor}, 3)()
		if fmt.Sprint(describe(got)) != fmt.Sprint(want[3:]) {
			t.Fatalf("after %s: %q, want %q", evs[2].Cursor, describe(got), want[3:])
		}
	})
	t.Run("FromVersion", func(t *testing.T) {
		got := watchN(t, st, c, client.WatchOptions{Key: w + "a", FromVersion: 2}, 2)()
		if fmt.Sprint(describe(got)) != fmt.Sprint([]string{want[3], want[5]}) {
			t.Fatalf("from version 2: %q", describe(got))
		}
	})
}

// TestWatchRefused: bad starting points and a principal without the
// read right fail at once with the field at fault.
func TestWatchRefused(t *testing.T) {
	t.Parallel()
	st := stack.MustRun(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name, token string
		o           client.WatchOptions
		code, field string
	}{
		{"NoReadRight", stack.WriterToken, client.WatchOptions{Prefix: scope}, contract.EForbidden, "prefix"},
		{"NoReadRightKey", stack.WriterToken, client.WatchOptions{Key: scope + "k"}, contract.EForbidden, "key"},
		{"OtherTenant", stack.AcmeToken, client.WatchOptions{Prefix: "tenant/globex/project/p/"}, contract.EForbidden, "prefix"},
		{"PrefixOutsideProject", stack.DevToken, client.WatchOptions{Prefix: "tenant/acme/"}, contract.EInvalid, "prefix"},
		{"BadCursor", stack.DevToken, client.WatchOptions{Prefix: scope, After: "p1.o01"}, contract.EInvalid, "after"},
		{"CursorOfAnotherPartition", stack.DevToken, client.WatchOptions{Prefix: scope, After: otherPartition(scope)}, contract.EInvalid, "after"},
		{"CursorBeyondTheLog", stack.DevToken, client.WatchOptions{Prefix: scope, After: ownPartition(scope, 1<<40)}, contract.EInvalid, "after"},
		{"FromVersionWithoutKey", stack.DevToken, client.WatchOptions{Prefix: scope, FromVersion: 1}, contract.EInvalid, "fromVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range client.New(st.URL, tc.token).Watch(ctx, tc.o) {
				var e *contract.Error
				if !errors.As(err, &e) || e.Code != tc.code || e.Field != tc.field {
					t.Fatalf("got %v, want %s on %s", err, tc.code, tc.field)
				}
				return
			}
			t.Fatal("the watch ended without an error")
		})
	}
}

func ownPartition(prefix string, offset int64) string {
	return contract.Cursor{Partition: changelog.Partition(contract.ScopeOf(prefix), 2), Offset: offset}.String()
}

func otherPartition(prefix string) string {
	return contract.Cursor{Partition: 1 - changelog.Partition(contract.ScopeOf(prefix), 2), Offset: 0}.String()
}
