package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// fakeListWatch is an HTTP API that answers listings and watches from
// scripts: the n-th listing's pages by cursor, the n-th watch's stream.
// It records each watch's after.
type fakeListWatch struct {
	t       *testing.T
	lists   []map[string]any            // listing n: cursor -> ListPage or error status
	watches []func(http.ResponseWriter) // connection n writes its stream

	mu     sync.Mutex
	listed int // listings started (first pages asked)
	afters []string
}

// sse writes one SSE event of type event with data (an id alone when
// event is empty) and flushes it.
func sse(w http.ResponseWriter, id, event string, data any) {
	if id != "" {
		fmt.Fprintf(w, "id: %s\n", id)
	}
	if event != "" {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n", event, b)
	}
	fmt.Fprint(w, "\n")
	w.(http.Flusher).Flush()
}

// change is a put event of key at version and cursor.
func change(cursor, key string, version int64) contract.WatchEvent {
	return contract.WatchEvent{Cursor: cursor, Key: scope + key, Version: version, Kind: contract.KindPut, Op: contract.OpSet, Value: json.RawMessage(`1`)}
}

// errorAnswer is an error status and its code.
type errorAnswer struct {
	status int
	code   string
}

// watchedAfter is the cursors the watches were sent after, in order; a
// request the client gave up on may still be served meanwhile.
func (f *fakeListWatch) watchedAfter() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.afters)
}

func (f *fakeListWatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.URL.Path {
	case "/v1/kv":
		cursor := r.URL.Query().Get("cursor")
		if cursor == "" {
			f.listed++
		}
		answer := f.lists[min(f.listed, len(f.lists))-1][cursor]
		if e, ok := answer.(errorAnswer); ok {
			w.WriteHeader(e.status)
			fmt.Fprintf(w, `{"error":{"code":%q,"message":"scripted"}}`, e.code)
			return
		}
		_ = json.NewEncoder(w).Encode(answer)
	case "/v1/watch":
		f.afters = append(f.afters, r.URL.Query().Get("after"))
		n := len(f.afters)
		if n > len(f.watches) {
			f.t.Errorf("watch %d not scripted", n)
			return
		}
		f.mu.Unlock()
		f.watches[n-1](w)
		f.mu.Lock()
	}
}

// collect runs ListWatch against f until n changes came (or it ended),
// and returns them and its error.
func collect(t *testing.T, f *fakeListWatch, n int) ([]client.Change, error) {
	t.Helper()
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := client.New(srv.URL, testToken, client.WithRetries(2, time.Millisecond, time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got []client.Change
	for ch, err := range c.ListWatch(ctx, client.ListWatchOptions{Prefix: scope, PageSize: 1}) {
		if err != nil {
			return got, err
		}
		got = append(got, ch)
		if len(got) == n {
			break
		}
	}
	return got, ctx.Err()
}

// describe is a change in short: S@pos[keys] (R when a relist) or E@cursor.
func describe(chs []client.Change) []string {
	var out []string
	for _, ch := range chs {
		switch ch.Type {
		case client.ChangeSnapshot:
			s := "S"
			if ch.Relist {
				s = "R"
			}
			s += "@" + ch.Position
			for _, e := range ch.Snapshot {
				s += " " + e.Key[len(scope):]
			}
			out = append(out, s)
		case client.ChangeEvent:
			out = append(out, "E@"+ch.Position+" "+ch.Event.Key[len(scope):])
		}
	}
	return out
}

func page(position, next string, keys ...string) client.ListPage {
	p := client.ListPage{Position: position, NextCursor: next, Truncated: next != "", Count: len(keys)}
	for _, k := range keys {
		p.Items = append(p.Items, contract.Entry{Key: scope + k, Version: 1, Value: json.RawMessage(`1`)})
	}
	return p
}

// A snapshot of every page, then the events after its position; a
// broken stream is resumed after the last cursor, its opening id
// included.
func TestListWatchSnapshotThenEvents(t *testing.T) {
	f := &fakeListWatch{t: t, lists: []map[string]any{{"": page("p0.o5", "p0.o5.YQ", "a"), "p0.o5.YQ": page("p0.o5", "", "b")}}}
	f.watches = []func(http.ResponseWriter){
		func(w http.ResponseWriter) { sse(w, "p0.o5", "", nil) }, // ends before any change
		func(w http.ResponseWriter) { sse(w, "p0.o6", "change", change("p0.o6", "a", 2)) },
		func(w http.ResponseWriter) {
			sse(w, "p0.o8", "change", change("p0.o8", "c", 1))
			time.Sleep(time.Second)
		},
	}
	got, err := collect(t, f, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"S@p0.o5 a b", "E@p0.o6 a", "E@p0.o8 c"}
	if !slices.Equal(describe(got), want) {
		t.Fatalf("got %q, want %q", describe(got), want)
	}
	if got, want := f.watchedAfter(), []string{"p0.o5", "p0.o5", "p0.o6"}; !slices.Equal(got, want) {
		t.Fatalf("the watches were after %q, want %q", got, want)
	}
}

// cursor_expired, in the stream or as the answer, relists and says so;
// a later page whose snapshot expired lists again from the first page.
func TestListWatchRelists(t *testing.T) {
	expired := errorAnswer{http.StatusGone, contract.ESnapshotExpired}
	f := &fakeListWatch{t: t, lists: []map[string]any{
		{"": page("p0.o5", "", "a")},
		{"": page("p0.o9", "p0.o9.YQ", "a"), "p0.o9.YQ": expired},
		{"": page("p0.o10", "p0.o10.YQ", "a"), "p0.o10.YQ": page("p0.o10", "", "b")},
		{"": page("p0.o12", "", "b")},
	}}
	gone := func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusGone)
		fmt.Fprint(w, `{"error":{"code":"cursor_expired","message":"gone","field":"after"}}`)
	}
	f.watches = []func(http.ResponseWriter){
		func(w http.ResponseWriter) {
			sse(w, "p0.o6", "change", change("p0.o6", "a", 2))
			sse(w, "", "error", contract.WatchEnd{Error: contract.ErrorDetail{Code: contract.ECursorExpired, Message: "compacted"}, Cursor: "p0.o6"})
		},
		gone,
		func(w http.ResponseWriter) {
			sse(w, "p0.o13", "change", change("p0.o13", "b", 2))
			time.Sleep(time.Second)
		},
	}
	got, err := collect(t, f, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"S@p0.o5 a", "E@p0.o6 a", "R@p0.o10 a b", "R@p0.o12 b", "E@p0.o13 b"}
	if !slices.Equal(describe(got), want) {
		t.Fatalf("got %q, want %q", describe(got), want)
	}
	if got, want := f.watchedAfter(), []string{"p0.o5", "p0.o10", "p0.o12"}; !slices.Equal(got, want) {
		t.Fatalf("the watches were after %q, want %q", got, want)
	}
}

// A fatal answer ends ListWatch with it; a listing without a position
// too (a watch from it could not be exact).
func TestListWatchFatal(t *testing.T) {
	f := &fakeListWatch{t: t, lists: []map[string]any{{"": page("p0.o5", "", "a")}}}
	f.watches = []func(http.ResponseWriter){func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"error":{"code":"forbidden","message":"no"}}`)
	}}
	got, err := collect(t, f, 10)
	if contract.ErrorCode(err) != contract.EForbidden || len(got) != 1 {
		t.Fatalf("got %q and %v, want the snapshot then forbidden", describe(got), err)
	}

	f = &fakeListWatch{t: t, lists: []map[string]any{{"": page("", "", "a")}}}
	if got, err := collect(t, f, 10); !errors.Is(err, client.ErrNoPosition) || len(got) != 0 {
		t.Fatalf("got %q and %v, want ErrNoPosition", describe(got), err)
	}
}

// Ending ctx ends ListWatch without an error, while it waits for an
// event or retries a listing.
func TestListWatchEndsWithContext(t *testing.T) {
	f := &fakeListWatch{t: t, lists: []map[string]any{{"": page("p0.o5", "", "a")}}}
	f.watches = []func(http.ResponseWriter){func(w http.ResponseWriter) {
		sse(w, "p0.o5", "", nil)
		time.Sleep(200 * time.Millisecond)
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := client.New(srv.URL, testToken, client.WithRetries(2, time.Millisecond, time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	for ch, err := range c.ListWatch(ctx, client.ListWatchOptions{Prefix: scope}) {
		if err != nil || ch.Type != client.ChangeSnapshot {
			t.Fatalf("got %v, %v", ch, err)
		}
		cancel() // the watch that follows sees it
	}

	f = &fakeListWatch{t: t, lists: []map[string]any{{"": errorAnswer{http.StatusServiceUnavailable, contract.EUnavailable}}}}
	srv2 := httptest.NewServer(f)
	defer srv2.Close()
	c = client.New(srv2.URL, testToken, client.WithRetries(1, 10*time.Millisecond, 10*time.Millisecond))
	ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	for ch, err := range c.ListWatch(ctx, client.ListWatchOptions{Prefix: scope}) {
		t.Fatalf("a listing that never answers yielded %v, %v", ch, err)
	}
	f.mu.Lock() // a try the client gave up on may still be answered
	listed := f.listed
	f.mu.Unlock()
	if listed < 2 {
		t.Fatalf("the listing was tried %d times, want it retried", listed)
	}
}
