package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
)

// logged is an event of kv.changes with its cursor.
type logged struct {
	cursor string
	event  contract.Event
}

// prefixLog reads the committed events of prefix's partition, from its
// log start to its end, keeping those under prefix, in log order.
func (s *stack) prefixLog(ctx context.Context, prefix string) []logged {
	s.tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.broker.Addrs...))
	if err != nil {
		s.tb.Fatal(err)
	}
	defer cl.Close()
	topic := s.broker.Topics.Changes
	p := changelog.Partition(contract.ScopeOf(prefix), partitions)
	start := testenv.StartOffsets(ctx, s.tb, cl, topic)[p]
	end := testenv.EndOffsets(ctx, s.tb, cl, topic)[p]
	var out []logged
	err = changelog.ReadCommitted(ctx, cl, changelog.Range{Topic: topic, Partition: p, From: start, End: end}, func(r *kgo.Record) error {
		if !strings.HasPrefix(changelog.EventKeyOf(r.Key), prefix) {
			return nil
		}
		e, err := changelog.Event(r)
		out = append(out, logged{contract.Cursor{Partition: p, Offset: r.Offset}.String(), e})
		return err
	})
	if err != nil {
		s.tb.Fatalf("read partition %d: %v", p, err)
	}
	return out
}

// assertWatchedIsLog checks that got, the events a watcher received, are
// exactly the log's events under prefix from the first one it received
// on: same cursors, keys, versions and values, in order, none missing,
// none twice.
func assertWatchedIsLog(t *testing.T, s *stack, prefix string, got []contract.WatchEvent) []logged {
	t.Helper()
	if len(got) == 0 {
		t.Fatal("the watcher received nothing")
	}
	for _, e := range got {
		if !strings.HasPrefix(e.Key, prefix) {
			t.Fatalf("the watcher of %s received an event of %s", prefix, e.Key)
		}
	}
	log := s.prefixLog(t.Context(), prefix)
	i := 0
	for i < len(log) && log[i].cursor != got[0].Cursor {
		i++
	}
	if i == len(log) {
		t.Fatalf("the first event watched, %s at %s, is not in the log", got[0].Key, got[0].Cursor)
	}
	log = log[i:]
	for j := range max(len(log), len(got)) {
		if j >= len(got) || j >= len(log) {
			t.Fatalf("the watcher received %d events, the log holds %d from the first one", len(got), len(log))
		}
		w, l := got[j], log[j]
		if w.Cursor != l.cursor || w.Key != l.event.Key || w.Version != l.event.Version || w.Kind != l.event.Kind ||
			(l.event.Live() && string(w.Value) != string(l.event.After)) {
			t.Fatalf("event %d: watched %s %s@%d %s, the log has %s %s@%d %s", j, w.Cursor, w.Key, w.Version, w.Value,
				l.cursor, l.event.Key, l.event.Version, l.event.After)
		}
	}
	return log
}

// watchRecorder follows a prefix with the Go client in the background,
// recording every event.
type watchRecorder struct {
	mu     sync.Mutex
	evs    []contract.WatchEvent
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

func startWatch(t *testing.T, c *client.Client, o client.WatchOptions) *watchRecorder {
	t.Helper()
	return startResumingWatch(t, []*client.Client{c}, o, nil)
}

// startResumingWatch follows o with clients[0]; when every is set, it
// cancels its watch after every() events and resumes after the last
// cursor it received with the next client (another writer), like a
// consumer that is killed and restarted.
func startResumingWatch(t *testing.T, clients []*client.Client, o client.WatchOptions, every func() int) *watchRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := &watchRecorder{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ctx.Err() == nil; i++ {
			limit := -1
			if every != nil {
				limit = every()
			}
			if !w.session(ctx, clients[i%len(clients)], o, limit) {
				return
			}
			if evs, _ := w.events(); len(evs) > 0 {
				o.After, o.FromVersion = evs[len(evs)-1].Cursor, 0
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

// session records the events of one watch until limit events (-1: no
// limit) or an error; it reports whether to go on.
func (w *watchRecorder) session(ctx context.Context, c *client.Client, o client.WatchOptions, limit int) bool {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := 0
	for ev, err := range c.Watch(sctx, o) {
		w.mu.Lock()
		if err != nil {
			w.err = err
		} else {
			w.evs = append(w.evs, ev)
		}
		w.mu.Unlock()
		if n++; err != nil || n == limit {
			return err == nil
		}
	}
	return ctx.Err() == nil
}

func (w *watchRecorder) events() ([]contract.WatchEvent, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]contract.WatchEvent(nil), w.evs...), w.err
}

func (w *watchRecorder) stop() {
	w.cancel()
	<-w.done
}

// waitWatching writes key under the watched prefix until the watcher
// received it: from then on it is following.
func waitWatching(t *testing.T, s *stack, w *watchRecorder, key string) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, "the watcher to follow "+key, func() bool {
		if _, ok := s.put(key, `"sentinel"`); !ok {
			return false
		}
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			evs, err := w.events()
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			if len(evs) > 0 {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	})
}

// sse is an event of a raw watch stream.
type sse struct {
	id, event, data string
}

// readSSE reads the events of a watch stream until it ends.
func readSSE(r io.Reader) ([]sse, error) {
	var out []sse
	var cur sse
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		field, value, _ := strings.Cut(line, ": ")
		switch {
		case line == "":
			if cur.event != "" {
				out = append(out, cur)
			}
			cur = sse{}
		case field == "id":
			cur.id = value
		case field == "event":
			cur.event = value
		case field == "data":
			cur.data = value
		}
	}
	return out, sc.Err()
}

// openWatch opens a raw watch stream of query; the caller closes the body.
func openWatch(t *testing.T, url, token, query string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url+"/v1/watch?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func metricValue(t *testing.T, reg prometheus.Gatherer, n, label string) float64 {
	t.Helper()
	return testenv.MetricSum(t, reg, n, label)
}

func watchEnd(t *testing.T, e sse) contract.WatchEnd {
	t.Helper()
	var end contract.WatchEnd
	if err := json.Unmarshal([]byte(e.data), &end); err != nil {
		t.Fatalf("end event %q: %v", e.data, err)
	}
	return end
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func errorsAs(err error, target **contract.Error) bool { return errors.As(err, target) }
