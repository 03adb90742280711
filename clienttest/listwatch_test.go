package clienttest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// listWatchCache is a map of a prefix fed by client.ListWatch: key ->
// "version value", and what it went through.
type listWatchCache struct {
	mu        sync.Mutex
	entries   map[string]string
	snapshots int
	events    int
	err       error
	// versions is each key's last version seen (deletes too): a watch's
	// versions of a key follow the snapshot's one by one.
	versions map[string]int64
	skipped  []string // a gap or a repeat
}

// apply applies one change of ListWatch.
func (c *listWatchCache) apply(ch client.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ch.Type {
	case client.ChangeSnapshot:
		c.snapshots++
		c.entries, c.versions = map[string]string{}, map[string]int64{}
		for _, e := range ch.Snapshot {
			c.entries[e.Key] = fmt.Sprintf("%d %s", e.Version, e.Value)
			c.versions[e.Key] = e.Version
		}
	case client.ChangeEvent:
		c.events++
		if v, ok := c.versions[ch.Event.Key]; ok && ch.Event.Version != v+1 {
			c.skipped = append(c.skipped, fmt.Sprintf("%s@%d after @%d", ch.Event.Key, ch.Event.Version, v))
		}
		c.versions[ch.Event.Key] = ch.Event.Version
		if ch.Event.Kind == contract.KindPut {
			c.entries[ch.Event.Key] = fmt.Sprintf("%d %s", ch.Event.Version, ch.Event.Value)
		} else {
			delete(c.entries, ch.Event.Key)
		}
	}
}

// state returns a copy of the cache, its counts and ListWatch's error.
func (c *listWatchCache) state() (map[string]string, int, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.entries), c.snapshots, c.events, c.err
}

// flakyProxy forwards to the stack and can cut every connection through
// it (the client then reconnects through it), counting the watches it
// forwarded.
func flakyProxy(t *testing.T, target string) (*httptest.Server, *atomic.Int64) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var watches atomic.Int64
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }, FlushInterval: -1}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/watch" {
			watches.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &watches
}

// TestListWatchFollowsWriters: a cache fed by ListWatch through a proxy
// whose connections are cut three times while 4 clients put, increment
// and delete 24 keys of its prefix (and write beside it) ends equal to
// the prefix's final listing: the snapshot (pages of 7) and the events
// after its position, resumed after each cut, miss nothing and repeat
// nothing a fold would show.
func TestListWatchFollowsWriters(t *testing.T) {
	t.Parallel()
	st := stack.MustRun(t)
	c := client.New(st.URL, stack.DevToken)
	ctx := t.Context()
	const prefix = scope + "informer/"
	writeKey := func(i, n int) {
		key := fmt.Sprintf("%sk%02d", prefix, (i*7+n*5)%24)
		var err error
		switch n % 4 {
		case 0, 1:
			_, err = c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(fmt.Sprintf(`{"by":%d,"n":%d}`, i, n))})
		case 2:
			_, err = c.Delete(ctx, key, client.DeleteOptions{})
		case 3:
			_, err = c.Put(ctx, client.PutRequest{Key: scope + "beside/" + key[len(prefix):], Value: json.RawMessage(`1`)})
		}
		if err != nil && contract.ErrorCode(err) != contract.ENotFound {
			t.Error(err)
		}
	}
	for n := range 24 {
		writeKey(0, n*4) // puts: a snapshot of several pages
	}

	proxy, watches := flakyProxy(t, st.URL)
	cache := &listWatchCache{}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pc := client.New(proxy.URL, stack.DevToken, client.WithRetries(3, 10*time.Millisecond, 100*time.Millisecond))
		for ch, err := range pc.ListWatch(lctx, client.ListWatchOptions{Prefix: prefix, PageSize: 7}) {
			if err != nil {
				cache.mu.Lock()
				cache.err = err
				cache.mu.Unlock()
				return
			}
			cache.apply(ch)
		}
	}()
	defer func() { cancel(); <-done }()
	stack.WaitFor(t, "the snapshot", func() bool { _, s, _, _ := cache.state(); return s > 0 })
	writeKey(0, 0) // the first event after the snapshot, k00's next version

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for n := range 60 {
				writeKey(i, n)
				if i == 0 && n%20 == 10 {
					proxy.CloseClientConnections() // cut the watch: it resumes after its last cursor
				}
			}
		})
	}
	wg.Wait()
	writeKey(0, 0) // and k00's last: a watch that skipped the first event shows a gap

	want := map[string]string{}
	for e, err := range c.ListAll(ctx, client.ListOptions{Prefix: prefix}) {
		if err != nil {
			t.Fatal(err)
		}
		want[e.Key] = fmt.Sprintf("%d %s", e.Version, e.Value)
	}
	stack.WaitFor(t, "the cache to reach the final listing", func() bool {
		got, _, _, err := cache.state()
		return err != nil || maps.Equal(got, want)
	})
	got, snapshots, events, err := cache.state()
	if err != nil {
		t.Fatal(err)
	}
	if len(cache.skipped) > 0 {
		t.Fatalf("versions skipped or repeated: %q", cache.skipped)
	}
	if snapshots != 1 || events < 100 || watches.Load() < 4 {
		t.Fatalf("%d snapshots, %d events, %d watch connections: want 1 snapshot, at least 100 events, a connection per cut", snapshots, events, watches.Load())
	}
	for k := range got {
		if !strings.HasPrefix(k, prefix) {
			t.Fatalf("the cache holds %s, not under %s", k, prefix)
		}
	}
}
