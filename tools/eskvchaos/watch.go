package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
)

// The watch workload: -watch-clients watchers each follow the prefix of a
// project (watchPrefixes) with client.Watch, through a writer drawn at random for each
// session of 1 to 6 s, resuming after the last cursor they received on
// the next one, while the nemesis kills and pauses the writers (and
// client.Watch reconnects on its own within a session). Every event is
// recorded with its cursor. After the run, once the watchers reached the
// end of the log, each watcher's events are checked against the log:
// exactly the log's records of its prefix after its start, in log order,
// no gap, no duplicate, and every acknowledged write under the prefix
// among them (docs/watch.md, "The contract").

// watchSession bounds a watcher's connection to one writer: long enough
// to outlive a few reconnections, short enough to change writers often.
var watchSession = span{1 * time.Second, 6 * time.Second}

// watched is an event a watcher received: where in the log, which key
// and version.
type watched struct {
	at      contract.Cursor
	key     string
	version int64
}

// watchRecord is what one watcher received.
type watchRecord struct {
	prefix string
	start  contract.Cursor // the watch starts after it (exclusive)

	mu       sync.Mutex
	events   []watched
	errors   []string // the ends client.Watch does not resume after (400, 403, 410)
	sessions int
	last     contract.Cursor
}

// snapshot returns the events received and the fatal errors so far.
func (w *watchRecord) snapshot() ([]watched, []string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]watched(nil), w.events...), append([]string(nil), w.errors...), w.sessions
}

// watchWorkload runs the watchers.
type watchWorkload struct {
	followers
	watchers []*watchRecord
}

// watchPrefixes are the prefixes the watchers follow, the i-th watcher
// the i-th (round robin): the projects of the first two register keys
// (each the register and the listing workload's keys beside it), then the
// collection workloads' projects (element events, whose record keys are
// not their event keys), then the other register projects.
func watchPrefixes(keys []string) []string {
	var scopes []string
	for _, k := range keys {
		scopes = append(scopes, contract.ScopeOf(k))
	}
	collections := []string{contract.ScopeOf(setKeys()[0]), contract.ScopeOf(listWorkloadKeys()[0]), contract.ScopeOf(queueKeys()[0])}
	n := min(2, len(scopes))
	return slices.Concat(scopes[:n], collections, scopes[n:])
}

// newWatchWorkload prepares n watchers on watchPrefixes(keys), each from
// the start of its partition (offset -1: before its first record), so
// that what it must receive is every record of its prefix.
func newWatchWorkload(urls []string, token string, keys []string, partitions int32, n int) *watchWorkload {
	w := &watchWorkload{}
	for _, u := range urls {
		// One try per call: client.Watch reconnects on its own, with
		// the policy's waits.
		w.clients = append(w.clients, client.New(u, token, client.WithRetries(1, 50*time.Millisecond, 500*time.Millisecond)))
	}
	prefixes := watchPrefixes(keys)
	for i := range n {
		scope := prefixes[i%len(prefixes)]
		start := contract.Cursor{Partition: changelog.Partition(scope, partitions), Offset: -1}
		w.watchers = append(w.watchers, &watchRecord{prefix: scope + "/", start: start, last: start})
	}
	return w
}

// start starts the watchers; stop ends them.
func (w *watchWorkload) start(ctx context.Context, seed uint64) {
	w.followers.start(ctx, len(w.watchers), seed, 6000, func(ctx context.Context, i int, rng *rand.Rand) { w.follow(ctx, w.watchers[i], rng) })
}

// follow runs one watcher until ctx ends: sessions through random
// writers, each resuming after the last cursor received.
func (w *watchWorkload) follow(ctx context.Context, r *watchRecord, rng *rand.Rand) {
	for ctx.Err() == nil {
		c, sctx, cancel := w.session(ctx, rng)
		r.mu.Lock()
		r.sessions++
		after := r.last.String()
		r.mu.Unlock()
		for ev, err := range c.Watch(sctx, client.WatchOptions{Prefix: r.prefix, After: after}) {
			if err != nil {
				r.fail(fmt.Sprintf("watch of %s after %s via %s ended: %v", r.prefix, after, c.BaseURL(), err))
				pause(sctx.Done(), 500*time.Millisecond)
				break
			}
			if !r.add(ev) {
				break
			}
		}
		cancel()
	}
}

// add records ev; false when its cursor does not parse (recorded as an
// error).
func (r *watchRecord) add(ev contract.WatchEvent) bool {
	at, err := contract.ParseCursor(ev.Cursor, "cursor")
	if err != nil {
		r.fail(fmt.Sprintf("watch of %s: event %s@%d has a bad cursor %q", r.prefix, ev.Key, ev.Version, ev.Cursor))
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, watched{at: at, key: ev.Key, version: ev.Version})
	r.last = at
	return true
}

func (r *watchRecord) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, msg)
}

// drain waits until every watcher received the last record of its prefix
// in evs (the log read after the clients stopped), at most timeout, and
// stops the watchers. It returns how long it waited.
func (w *watchWorkload) drain(ctx context.Context, evs []logcheck.Event, timeout time.Duration) time.Duration {
	t0 := time.Now()
	defer w.stop()
	deadline := time.Now().Add(timeout)
	for _, r := range w.watchers {
		target := r.start
		for _, e := range prefixEvents(evs, r.prefix, r.start) {
			target = contract.Cursor{Partition: e.Partition, Offset: e.Offset}
		}
		for time.Now().Before(deadline) && ctx.Err() == nil {
			r.mu.Lock()
			reached := r.last.Offset >= target.Offset
			r.mu.Unlock()
			if reached {
				break
			}
			pause(ctx.Done(), 50*time.Millisecond)
		}
	}
	return time.Since(t0)
}

// prefixEvents returns the events of evs (log order per partition) in
// start's partition after start whose key is under prefix: what a watch
// of prefix after start delivers.
func prefixEvents(evs []logcheck.Event, prefix string, start contract.Cursor) []logcheck.Event {
	var out []logcheck.Event
	for _, e := range evs {
		if e.Partition == start.Partition && e.Offset > start.Offset && strings.HasPrefix(e.Event.Key, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// watchFindings is what the check of the watchers found.
type watchFindings struct {
	watchers, sessions    int
	received, expected    int
	acked                 int
	beyond                int // events after the end of the log read (none expected: the clients had stopped)
	drained               time.Duration
	missing, unexpected   int
	duplicates, reordered int
	violations            []string
}

// checkWatch checks what each watcher received against the log evs
// (every committed record, log order per partition, read after the
// clients stopped and up to end per partition) and the acknowledged
// writes acks.
func checkWatch(ws []*watchRecord, evs []logcheck.Event, end map[int32]int64, acks []keyVersion) watchFindings {
	f := watchFindings{watchers: len(ws)}
	for _, w := range ws {
		got, errs, sessions := w.snapshot()
		f.sessions += sessions
		f.violations = append(f.violations, errs...)
		all := prefixEvents(evs, w.prefix, contract.Cursor{Partition: w.start.Partition, Offset: -1})
		f.checkOne(w.prefix, w.start, got, all, end, acks)
	}
	return f
}

// checkOne compares one watcher's events got with the log's records of
// its prefix after its start (all: every record of the prefix).
func (f *watchFindings) checkOne(prefix string, start contract.Cursor, got []watched, all []logcheck.Event, end map[int32]int64, acks []keyVersion) {
	var want []logcheck.Event
	before := map[keyVersion]bool{} // written before the watch's start: not its to receive
	for _, e := range all {
		if e.Offset > start.Offset {
			want = append(want, e)
		} else {
			before[keyVersion{e.Event.Key, e.Event.Version}] = true
		}
	}
	index := make(map[int64]int, len(want)) // offset -> position in want
	for i, e := range want {
		index[e.Offset] = i
	}
	f.expected += len(want)
	seen := map[int64]bool{}
	last := -1
	for _, g := range got {
		if e, ok := end[g.at.Partition]; ok && g.at.Offset >= e {
			f.beyond++
			continue
		}
		f.received++
		i, inLog := index[g.at.Offset]
		inLog = inLog && g.at.Partition == start.Partition
		switch {
		case !inLog:
			f.unexpected++
			f.violations = append(f.violations, fmt.Sprintf("watch of %s received %s@%d at %s: no record of the prefix there in the log", prefix, g.key, g.version, g.at))
		case seen[g.at.Offset]:
			f.duplicates++
			f.violations = append(f.violations, fmt.Sprintf("watch of %s received %s@%d at %s twice", prefix, g.key, g.version, g.at))
		case want[i].Event.Key != g.key || want[i].Event.Version != g.version:
			f.unexpected++
			f.violations = append(f.violations, fmt.Sprintf("watch of %s received %s@%d at %s, the log has %s@%d there", prefix, g.key, g.version, g.at, want[i].Event.Key, want[i].Event.Version))
		case i < last:
			f.reordered++
			f.violations = append(f.violations, fmt.Sprintf("watch of %s received %s after %s: out of log order", prefix, g.at, contract.Cursor{Partition: start.Partition, Offset: want[last].Offset}))
		}
		if inLog {
			seen[g.at.Offset] = true
			last = max(last, i)
		}
	}
	f.checkMissing(prefix, want, seen, acks, before)
}

// checkMissing reports the log's records of the prefix the watcher did
// not receive, and the acknowledged writes under the prefix not among
// what it received.
func (f *watchFindings) checkMissing(prefix string, want []logcheck.Event, seen map[int64]bool, acks []keyVersion, before map[keyVersion]bool) {
	received := map[keyVersion]bool{}
	for _, e := range want {
		if seen[e.Offset] {
			received[keyVersion{e.Event.Key, e.Event.Version}] = true
			continue
		}
		f.missing++
		f.violations = append(f.violations, fmt.Sprintf("watch of %s missed %s@%d at %s", prefix, e.Event.Key, e.Event.Version,
			contract.Cursor{Partition: e.Partition, Offset: e.Offset}))
	}
	for _, a := range acks {
		if !strings.HasPrefix(a.key, prefix) || before[a] {
			continue
		}
		f.acked++
		if !received[a] {
			f.violations = append(f.violations, fmt.Sprintf("watch of %s did not receive the acknowledged write %s@%d", prefix, a.key, a.version))
		}
	}
}

func (f *watchFindings) print(w io.Writer) {
	fmt.Fprintf(w, "watch: %d violations (%d watchers, %d sessions through random writers; %d events received, %d expected from the log, "+
		"%d missing, %d not the log's, %d twice, %d out of order; %d acknowledged writes under their prefixes; drained in %s)\n",
		len(f.violations), f.watchers, f.sessions, f.received, f.expected, f.missing, f.unexpected, f.duplicates, f.reordered,
		f.acked, f.drained.Round(time.Millisecond))
	printFirst(w, f.violations)
}

// saveReadPaths writes what the watchers received (watch.txt: a line
// "PREFIX CURSOR KEY@VERSION" per event, then the errors) and the history
// reads (history-reads.json) to dir.
func saveReadPaths(dir string, w *watchWorkload, h *historyReads) error {
	var b strings.Builder
	for _, r := range w.watchers {
		got, errs, _ := r.snapshot()
		for _, g := range got {
			fmt.Fprintf(&b, "%s %s %s@%d\n", r.prefix, g.at, g.key, g.version)
		}
		for _, e := range errs {
			fmt.Fprintf(&b, "%s error: %s\n", r.prefix, e)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "watch.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	reads, _, _ := h.snapshot()
	js, err := json.Marshal(reads)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "history-reads.json"), js, 0o644)
}

// followers runs the sessions of a workload's followers (watchers,
// informers) until stop: one goroutine each with a random source of its
// own, each session through a random writer for a random watchSession.
type followers struct {
	clients []*client.Client // one per writer
	wg      sync.WaitGroup
	cancel  context.CancelFunc
}

// start runs follow for followers 0..n-1, the i-th with the random
// source (seed, stream+i).
func (f *followers) start(ctx context.Context, n int, seed, stream uint64, follow func(ctx context.Context, i int, rng *rand.Rand)) {
	ctx, f.cancel = context.WithCancel(ctx)
	for i := range n {
		rng := rand.New(rand.NewPCG(seed, stream+uint64(i)))
		f.wg.Go(func() { follow(ctx, i, rng) })
	}
}

// stop ends the followers and waits for them.
func (f *followers) stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
}

// session is a session's writer and its context, which ends after a
// random watchSession duration.
func (f *followers) session(ctx context.Context, rng *rand.Rand) (*client.Client, context.Context, context.CancelFunc) {
	c := f.clients[rng.IntN(len(f.clients))]
	d := watchSession.min + time.Duration(rng.Int64N(int64(watchSession.max-watchSession.min)+1))
	sctx, cancel := context.WithTimeout(ctx, d)
	return c, sctx, cancel
}
