package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/tools/internal/stats"
	"github.com/eskv/eskv/tools/linz"
)

// The availability figures: per fault kind, how long acknowledged writes
// stopped on the partitions the fault hit, how long after the heal the
// first write was acknowledged there, and how long the writers' /readyz
// took to tell the truth.

// readiness polls every writer's /readyz and records what it answered.
type readiness struct {
	writers []*proc.Proc
	mu      sync.Mutex
	samples map[*proc.Proc][]readySample
}

type readySample struct {
	at    time.Time
	ready bool
}

func newReadiness(writers []*proc.Proc) *readiness {
	return &readiness{writers: writers, samples: map[*proc.Proc][]readySample{}}
}

// poll asks every writer every interval until ctx ends; an answer other
// than 200 within a second is not ready.
func (r *readiness) poll(ctx context.Context, interval time.Duration) {
	cl := &http.Client{Timeout: time.Second}
	var wg sync.WaitGroup
	for _, w := range r.writers {
		wg.Go(func() {
			for ctx.Err() == nil {
				at := time.Now()
				ok := false
				if resp, err := cl.Get(w.URL + "/readyz"); err == nil {
					ok = resp.StatusCode == http.StatusOK
					resp.Body.Close()
				}
				r.mu.Lock()
				r.samples[w] = append(r.samples[w], readySample{at: at, ready: ok})
				r.mu.Unlock()
				pause(ctx.Done(), interval-time.Since(at))
			}
		})
	}
	wg.Wait()
}

// firstAfter returns the time of w's first sample at or after t whose
// readiness is ready, and whether there is one before limit.
func (r *readiness) firstAfter(w *proc.Proc, t, limit time.Time, ready bool) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples[w] {
		if !s.at.Before(t) && s.at.Before(limit) && s.ready == ready {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// availability is the figures of one fault kind.
type availability struct {
	kind              string
	faults            int
	stopped, recovery []time.Duration // per (fault, partition hit)
	unready, ready    []time.Duration // per (fault, writer hit) that turned unready
	notUnready        int             // (fault, writer) pairs that stayed ready through a fault of 2 s or more
}

// measureAvailability computes the figures from the faults, the CAS
// clients' history (acknowledged writes by partition), the owners and
// the readiness samples.
func measureAvailability(recs []faultRecord, h []linz.Op, t0 time.Time, partitions int32, owners *ownerTimeline,
	ready *readiness, writers []*proc.Proc) []availability {
	acks := map[int32][]time.Time{} // return times of acknowledged writes, by partition
	for _, o := range h {
		if o.In.Kind.Writes() && o.Out.Outcome == linz.OK {
			p := changelog.Partition(contract.ScopeOf(o.In.Key), partitions)
			acks[p] = append(acks[p], t0.Add(time.Duration(o.Return)))
		}
	}
	for _, a := range acks {
		slices.SortFunc(a, func(x, y time.Time) int { return x.Compare(y) })
	}
	byKind := map[string]*availability{}
	for _, f := range recs {
		if f.heal.IsZero() {
			continue
		}
		a := byKind[f.kind]
		if a == nil {
			a = &availability{kind: f.kind}
			byKind[f.kind] = a
		}
		a.faults++
		hit := f.writers
		if f.all {
			hit = writers
		}
		for p, times := range acks {
			if !f.all && !slices.ContainsFunc(hit, func(w *proc.Proc) bool {
				return owners.ownerAt(p, f.start.Sub(t0)) == instanceID(w)
			}) {
				continue
			}
			if stop, rec, ok := gaps(times, f.start, f.heal); ok {
				a.stopped, a.recovery = append(a.stopped, stop), append(a.recovery, rec)
			}
		}
		for _, w := range hit {
			if f.heal.Sub(f.start) < 2*time.Second {
				continue // too short to ask readiness to tell
			}
			down, ok := ready.firstAfter(w, f.start, f.heal.Add(time.Second), false)
			if !ok {
				a.notUnready++
				continue
			}
			a.unready = append(a.unready, down.Sub(f.start))
			if up, ok := ready.firstAfter(w, f.heal, nextFault(recs, w, f.heal), true); ok {
				a.ready = append(a.ready, up.Sub(f.heal))
			}
		}
	}
	var out []availability
	for _, a := range byKind {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].kind < out[j].kind })
	return out
}

// nextFault returns when the next fault that hits w began after t, or a
// minute after t: readiness after a heal is measured up to it.
func nextFault(recs []faultRecord, w *proc.Proc, t time.Time) time.Time {
	next := t.Add(time.Minute)
	for _, f := range recs {
		if f.start.After(t) && f.start.Before(next) && (f.all || slices.Contains(f.writers, w)) {
			next = f.start
		}
	}
	return next
}

// gaps returns, for the sorted ack times of a partition, the longest time
// without an acknowledged write from start until the first one after
// heal, and the time from heal to that one; false when none came after.
func gaps(times []time.Time, start, heal time.Time) (stopped, recovery time.Duration, ok bool) {
	i := sort.Search(len(times), func(i int) bool { return !times[i].Before(start) })
	prev := start
	for ; i < len(times); i++ {
		stopped = max(stopped, times[i].Sub(prev))
		prev = times[i]
		if times[i].After(heal) {
			return stopped, times[i].Sub(heal), true
		}
	}
	return 0, 0, false
}

// printAvailability prints one line per fault kind.
func printAvailability(w io.Writer, as []availability) {
	fmt.Fprintln(w, "availability (per fault kind: acknowledged writes stopped on the partitions hit, first write after the heal, /readyz of the writers hit):")
	for _, a := range as {
		fmt.Fprintf(w, "  %-20s %2d faults; writes stopped %s; first write after heal %s", a.kind, a.faults, spread(a.stopped), spread(a.recovery))
		if len(a.unready)+a.notUnready > 0 {
			fmt.Fprintf(w, "; unready after %s, ready again after heal %s, %d stayed ready", spread(a.unready), spread(a.ready), a.notUnready)
		}
		fmt.Fprintln(w)
	}
}

// spread is "p50/p99/max of n" of ds, or "-" for none.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
	return fmt.Sprintf("p50 %s p99 %s max %s (n=%d)", ms(stats.Quantile(s, 0.50)), ms(stats.Quantile(s, 0.99)), ms(s[len(s)-1]), len(s))
}
