package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/tools/linz"
)

// collectionWorkload is what the set, list and queue workloads share:
// clients that each pick a collection and a writer at random and make one
// request at a time until stop, pausing after a request that failed or
// whose outcome is unknown; the outcomes counted by name; and the
// acknowledged changes (A) the check looks for in the log.
type collectionWorkload[A any] struct {
	c    *clients
	keys []string
	// stream is the first PCG stream of the clients' random sources,
	// distinct per workload so their choices are independent.
	stream uint64

	mu       sync.Mutex
	outcomes map[string]int
	acked    []A
}

func newCollectionWorkload[A any](c *clients, keys []string, stream uint64) collectionWorkload[A] {
	return collectionWorkload[A]{c: c, keys: keys, stream: stream, outcomes: map[string]int{}}
}

// step makes one request of client id (its seq-th) to the collection key
// through base (a writer's URL of key) and returns its outcome.
type step func(id, seq int, rng *rand.Rand, key, base string) string

// run starts n clients making requests with do and returns once stop is
// closed and each finished its current request.
func (w *collectionWorkload[A]) run(n int, seed uint64, stop <-chan struct{}, do step) {
	clientLoops(n, seed, w.stream, stop, func(id, seq int, rng *rand.Rand) bool {
		key := w.keys[rng.IntN(len(w.keys))]
		base := w.c.urls[rng.IntN(len(w.c.urls))] + "/v1/kv/" + key
		outcome := do(id, seq, rng, key, base)
		return outcome == "failed" || outcome == "unknown"
	})
}

// clientLoops runs n clients until stop is closed: each calls do with its
// id, the number of its call and its own random source (PCG stream
// stream+id of seed), one call after the other, and pauses 20 to 50 ms
// after a call that asks it to back off (one that failed or whose outcome
// is unknown). It returns once each finished its current call.
func clientLoops(n int, seed, stream uint64, stop <-chan struct{}, do func(id, seq int, rng *rand.Rand) (backoff bool)) {
	var wg sync.WaitGroup
	for id := range n {
		rng := rand.New(rand.NewPCG(seed, stream+uint64(id)))
		wg.Go(func() {
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				if do(id, seq, rng) {
					pause(stop, 20*time.Millisecond+time.Duration(rng.IntN(30))*time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
}

// workloadKeys are n collection keys of a workload, in a project of their
// own: tenant/chaos/project/<project>/<name>-<i>.
func workloadKeys(project, name string, n int) []string {
	k := make([]string, n)
	for i := range k {
		k[i] = fmt.Sprintf("tenant/chaos/project/%s/%s-%d", project, name, i)
	}
	return k
}

// record counts outcome and keeps the acknowledged changes.
func (w *collectionWorkload[A]) record(outcome string, acked ...A) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.outcomes[outcome]++
	w.acked = append(w.acked, acked...)
}

// snapshot returns the outcomes and the acknowledged changes so far.
func (w *collectionWorkload[A]) snapshot() (map[string]int, []A) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.outcomes))
	for k, v := range w.outcomes {
		out[k] = v
	}
	return out, slices.Clone(w.acked)
}

// post sends a collection write and decodes a 200 answer into ans. Its
// outcome: ok (200), empty (404: an empty list or queue), failed (certainly
// not applied: refused before it was queued) or unknown.
func (w *collectionWorkload[A]) post(url string, body, ans any) (string, answer) {
	b, _ := json.Marshal(body)
	a := w.c.do(http.MethodPost, url, b)
	switch {
	case a.err == nil && a.status == http.StatusOK && json.Unmarshal(a.body, ans) == nil:
		return "ok", a
	case a.err == nil && a.status == http.StatusNotFound:
		return "empty", a
	}
	if o, _ := classifyWrite(a, ""); o.Outcome == linz.Failed {
		return "failed", a
	}
	return "unknown", a
}

// ackedVersions returns the key and version (kv) of each acknowledged
// change of w: what the watchers must have received.
func ackedVersions[A any](w *collectionWorkload[A], kv func(A) keyVersion) []keyVersion {
	_, acked := w.snapshot()
	out := make([]keyVersion, len(acked))
	for i, a := range acked {
		out[i] = kv(a)
	}
	return out
}

// keyVersion names an event of the log: its key and version.
type keyVersion struct {
	key     string
	version int64
}

// collectionFindings are what every collection workload's check reports.
type collectionFindings struct {
	outcomes map[string]int
	events   int
}

// print prints a workload's line, "NAME: N violations (requests by
// outcome; events; detail)", and its first violations.
func (f *collectionFindings) print(w io.Writer, name string, violations []string, detail string) {
	n, by := countBy(f.outcomes)
	fmt.Fprintf(w, "%s: %d violations (%d requests: %s; %d events in the log; %s)\n", name, len(violations), n, by, f.events, detail)
	printFirst(w, violations)
}

// eventsOf returns the events of the log whose key is one of keys, per
// key in version order: what a collection workload folds.
func eventsOf(evs []logcheck.Event, keys []string) map[string][]contract.Event {
	byKey := map[string][]contract.Event{}
	for _, le := range evs {
		if slices.Contains(keys, le.Event.Key) {
			byKey[le.Event.Key] = append(byKey[le.Event.Key], le.Event)
		}
	}
	for _, es := range byKey {
		slices.SortFunc(es, func(a, b contract.Event) int { return cmp.Compare(a.Version, b.Version) })
	}
	return byKey
}
