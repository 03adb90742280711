package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/projection"
)

// The informer workload: -informer-clients consumers each keep a cache
// of the prefix of a project (watchPrefixes, as the watchers: the
// register projects beside the listing workload's keys, which it puts
// and deletes, then the collections) as docs/watch.md tells a cache to, through
// a writer drawn at random for each session of 1 to 6 s: a session
// either lists the prefix again (client.ListWatch: every page of one
// listing at its position, then the watch after it; a third of the
// sessions, drawn at random) or resumes the watch after the cache's last
// cursor (client.Watch). Each event must carry the next version of its
// key after the one the cache holds from the listing or an earlier event
// (a key the listing did not hold may start anywhere): a version skipped
// is a gap, one seen again a duplicate. Once the informers reached the
// end of the log and the projection holds all of it, each cache must
// equal the projection's entries of its prefix (key and version; an
// entry past its expiry compared on neither side).

// informer is one consumer's cache and what it went through.
type informer struct {
	prefix    string
	partition int32

	mu       sync.Mutex
	cache    map[string]cachedEntry
	versions map[string]int64 // each key's last version seen, deletes too
	last     contract.Cursor  // the cache's position (none before the first listing)
	listed   bool
	lists    int // snapshots applied (ListWatch's relists included)
	relists  int // snapshots ListWatch took after a cursor_expired
	sessions int
	events   int
	gaps     []string
	dups     []string
	errors   []string
}

// cachedEntry is what a cache keeps of an entry.
type cachedEntry struct {
	version   int64
	expiresAt *time.Time
}

// informerWorkload runs the informers.
type informerWorkload struct {
	followers
	informers []*informer
}

// newInformerWorkload prepares n informers on watchPrefixes(keys), the
// i-th on the i-th (round robin).
func newInformerWorkload(urls []string, token string, keys []string, partitions int32, n int) *informerWorkload {
	w := &informerWorkload{}
	for _, u := range urls {
		w.clients = append(w.clients, client.New(u, token, client.WithRetries(1, 50*time.Millisecond, 500*time.Millisecond)))
	}
	prefixes := watchPrefixes(keys)
	for i := range n {
		scope := prefixes[i%len(prefixes)]
		w.informers = append(w.informers, &informer{prefix: scope + "/", partition: changelog.Partition(scope, partitions)})
	}
	return w
}

// start starts the informers; stop ends them.
func (w *informerWorkload) start(ctx context.Context, seed uint64) {
	w.followers.start(ctx, len(w.informers), seed, 7000, func(ctx context.Context, i int, rng *rand.Rand) { w.follow(ctx, w.informers[i], rng) })
}

// follow runs one informer's sessions until ctx ends.
func (w *informerWorkload) follow(ctx context.Context, r *informer, rng *rand.Rand) {
	for ctx.Err() == nil {
		c, sctx, cancel := w.session(ctx, rng)
		r.mu.Lock()
		r.sessions++
		relist, after := !r.listed || rng.IntN(3) == 0, r.last.String()
		r.mu.Unlock()
		if relist {
			r.listWatch(sctx, c, 1+rng.IntN(50))
		} else {
			r.resume(sctx, c, after)
		}
		cancel()
	}
}

// listWatch runs client.ListWatch until ctx ends, feeding the cache.
func (r *informer) listWatch(ctx context.Context, c *client.Client, pageSize int) {
	for ch, err := range c.ListWatch(ctx, client.ListWatchOptions{Prefix: r.prefix, PageSize: pageSize}) {
		if err != nil {
			r.fail(fmt.Sprintf("list-watch of %s via %s ended: %v", r.prefix, c.BaseURL(), err))
			pause(ctx.Done(), 500*time.Millisecond)
			return
		}
		if ch.Type == client.ChangeSnapshot {
			r.replace(ch)
		} else if !r.apply(ch.Event) {
			return
		}
	}
}

// resume watches the prefix after the cache's last cursor until ctx
// ends; a cursor_expired makes the next session list again.
func (r *informer) resume(ctx context.Context, c *client.Client, after string) {
	for ev, err := range c.Watch(ctx, client.WatchOptions{Prefix: r.prefix, After: after}) {
		if contract.ErrorCode(err) == contract.ECursorExpired {
			r.mu.Lock()
			r.listed = false
			r.mu.Unlock()
			return
		}
		if err != nil {
			r.fail(fmt.Sprintf("watch of %s after %s via %s ended: %v", r.prefix, after, c.BaseURL(), err))
			pause(ctx.Done(), 500*time.Millisecond)
			return
		}
		if !r.apply(ev) {
			return
		}
	}
}

// replace makes the cache a snapshot.
func (r *informer) replace(ch client.Change) {
	at, err := contract.ParseCursor(ch.Position, "position")
	if err != nil || at.Partition != r.partition {
		r.fail(fmt.Sprintf("listing of %s: position %q is not one of partition %d", r.prefix, ch.Position, r.partition))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cache, r.versions = map[string]cachedEntry{}, map[string]int64{}
	for _, e := range ch.Snapshot {
		r.cache[e.Key] = cachedEntry{version: e.Version, expiresAt: e.ExpiresAt}
		r.versions[e.Key] = e.Version
	}
	r.last, r.listed = at, true
	r.lists++
	if ch.Relist {
		r.relists++
	}
}

// apply applies an event, checking it carries its key's next version;
// false when its cursor does not parse (recorded as an error).
func (r *informer) apply(ev contract.WatchEvent) bool {
	at, err := contract.ParseCursor(ev.Cursor, "cursor")
	if err != nil {
		r.fail(fmt.Sprintf("watch of %s: event %s@%d has a bad cursor %q", r.prefix, ev.Key, ev.Version, ev.Cursor))
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events++
	if v, ok := r.versions[ev.Key]; ok && ev.Version != v+1 {
		what := fmt.Sprintf("informer of %s: %s@%d at %s after version %d", r.prefix, ev.Key, ev.Version, at, v)
		if ev.Version <= v {
			r.dups = append(r.dups, what)
		} else {
			r.gaps = append(r.gaps, what)
		}
	}
	r.versions[ev.Key] = max(r.versions[ev.Key], ev.Version)
	if ev.Kind == contract.KindPut {
		r.cache[ev.Key] = cachedEntry{version: ev.Version, expiresAt: ev.ExpiresAt}
	} else {
		delete(r.cache, ev.Key)
	}
	r.last = at
	return true
}

func (r *informer) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, msg)
}

// drain waits until every informer's cache stands at or after the last
// record of its prefix in evs (at most timeout in all), and stops them.
func (w *informerWorkload) drain(ctx context.Context, evs []logcheck.Event, timeout time.Duration) {
	defer w.stop()
	deadline := time.Now().Add(timeout)
	for _, r := range w.informers {
		target := contract.Cursor{Partition: r.partition, Offset: -1}
		for _, e := range prefixEvents(evs, r.prefix, target) {
			target.Offset = e.Offset
		}
		for time.Now().Before(deadline) && ctx.Err() == nil {
			r.mu.Lock()
			reached := r.listed && r.last.Offset >= target.Offset
			r.mu.Unlock()
			if reached {
				break
			}
			pause(ctx.Done(), 50*time.Millisecond)
		}
	}
}

// informerFindings is what the check of the informers found.
type informerFindings struct {
	informers, sessions, lists, relists, events int
	keys                                        int // entries compared with the projection
	gaps, duplicates, differing                 int
	violations                                  []string
}

// checkInformers compares each informer's cache with the projection's
// entries of its prefix (read once the projection held the whole log
// and the informers stood at its end), and collects the gaps and
// duplicates they saw.
func checkInformers(ctx context.Context, store *projection.Store, infs []*informer) (informerFindings, error) {
	var f informerFindings
	f.informers = len(infs)
	now := time.Now()
	for _, r := range infs {
		want, err := projectedVersions(ctx, store, r.prefix, now)
		if err != nil {
			return f, err
		}
		r.mu.Lock()
		f.sessions, f.lists, f.relists, f.events = f.sessions+r.sessions, f.lists+r.lists, f.relists+r.relists, f.events+r.events
		f.gaps, f.duplicates = f.gaps+len(r.gaps), f.duplicates+len(r.dups)
		f.violations = append(append(append(f.violations, r.errors...), r.gaps...), r.dups...)
		if !r.listed {
			f.violations = append(f.violations, fmt.Sprintf("informer of %s never listed", r.prefix))
		}
		f.compare(r.prefix, r.cache, want, now)
		r.mu.Unlock()
	}
	return f, nil
}

// compare counts and reports the keys where cache and the projection's
// versions want differ; a cached entry past its expiry at now is not
// compared (the projection's listing hides it).
func (f *informerFindings) compare(prefix string, cache map[string]cachedEntry, want map[string]int64, now time.Time) {
	for k, e := range cache {
		if e.expiresAt != nil && !now.Before(*e.expiresAt) {
			continue
		}
		f.keys++
		if v, ok := want[k]; !ok || v != e.version {
			f.differing++
			f.violations = append(f.violations, fmt.Sprintf("informer of %s holds %s@%d, the projection has version %d (0: none)", prefix, k, e.version, v))
		}
	}
	for k, v := range want {
		if _, ok := cache[k]; !ok {
			f.differing++
			f.violations = append(f.violations, fmt.Sprintf("informer of %s lacks %s@%d of the projection", prefix, k, v))
		}
	}
}

// projectedVersions is the version of every live entry under prefix in
// the projection at now.
func projectedVersions(ctx context.Context, store *projection.Store, prefix string, now time.Time) (map[string]int64, error) {
	out := map[string]int64{}
	pg := projection.Page{Limit: 1000, MaxBytes: 64 << 20, Now: now}
	for {
		entries, truncated, err := store.List(ctx, prefix, pg)
		if err != nil {
			return nil, fmt.Errorf("list %s in the projection: %w", prefix, err)
		}
		for _, e := range entries {
			out[e.Key] = e.Version
		}
		if !truncated || len(entries) == 0 {
			return out, nil
		}
		pg.After = entries[len(entries)-1].Key
	}
}

func (f *informerFindings) print(w io.Writer) {
	fmt.Fprintf(w, "informers: %d violations (%d informers, %d sessions through random writers, %d listings (%d relists after cursor_expired), %d events; "+
		"%d gaps, %d duplicates; %d cached entries against the projection, %d differing)\n",
		len(f.violations), f.informers, f.sessions, f.lists, f.relists, f.events, f.gaps, f.duplicates, f.keys, f.differing)
	printFirst(w, f.violations)
}
