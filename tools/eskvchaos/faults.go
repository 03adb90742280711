package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/projection"
)

// nemesis injects faults at random intervals: SIGKILL then restart of a
// writer, projector or (with -kill-broker) the broker, and SIGSTOP then
// SIGCONT of a writer or projector. It keeps at least one writer and one
// projector healthy, pauses one writer at a time, and never faults a
// process that is already down or paused.
type nemesis struct {
	s     *stack
	c     config
	rng   *rand.Rand
	rngMu sync.Mutex

	// db stands for Postgres in busy while it is stalled.
	db *proc.Proc

	mu      sync.Mutex
	busy    map[*proc.Proc]bool // faulted and not yet recovered
	counts  map[string]int
	pauses  []logcheck.Pause
	records []faultRecord
	twins   int // twin writers started (names)
	pending sync.WaitGroup
}

// faultRecord is one fault as the availability figures see it: when it
// began and was healed, and which writers it hit (nil: every writer;
// none for a projector's).
type faultRecord struct {
	kind, detail string
	writers      []*proc.Proc
	all          bool // it hit every writer (the broker, Postgres)
	start, heal  time.Time
}

func newNemesis(s *stack, c config) *nemesis {
	return &nemesis{s: s, c: c, rng: rand.New(rand.NewPCG(c.seed, 0x6e656d)),
		busy: map[*proc.Proc]bool{}, counts: map[string]int{}, db: proc.New(proc.Spec{Name: "postgres"})}
}

// record notes a fault that began now and returns its index for healed.
func (n *nemesis) record(kind, detail string, all bool, writers ...*proc.Proc) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.records = append(n.records, faultRecord{kind: kind, detail: detail, all: all, writers: writers, start: time.Now()})
	return len(n.records) - 1
}

// healed marks the i-th record healed now.
func (n *nemesis) healed(i int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.records[i].heal = time.Now()
}

func (n *nemesis) draw(sp span) time.Duration {
	n.rngMu.Lock()
	defer n.rngMu.Unlock()
	if sp.max <= sp.min {
		return sp.min
	}
	return sp.min + time.Duration(n.rng.Int64N(int64(sp.max-sp.min)))
}

func (n *nemesis) intn(k int) int {
	n.rngMu.Lock()
	defer n.rngMu.Unlock()
	return n.rng.IntN(k)
}

// run injects faults until ctx ends, then waits for every faulted process
// to be restarted or resumed.
func (n *nemesis) run(ctx context.Context) {
	defer n.pending.Wait()
	if len(n.c.faults) == 0 {
		<-ctx.Done()
		return
	}
	var deck []string
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.draw(n.c.faultEvery)):
		}
		// Deal the kinds from a shuffled deck, each once a round, so
		// that a short run meets every kind: the first in the deck with
		// a target now.
		if len(deck) == 0 {
			deck = slices.Clone(n.c.faults)
			for i := len(deck) - 1; i > 0; i-- {
				j := n.intn(i + 1)
				deck[i], deck[j] = deck[j], deck[i]
			}
		}
		for i, kind := range deck {
			if n.inject(ctx, kind) {
				deck = slices.Delete(deck, i, i+1)
				break
			}
		}
	}
}

// healthy returns the processes of ps that run and are not being faulted.
func (n *nemesis) healthy(ps []*proc.Proc) []*proc.Proc {
	var out []*proc.Proc
	for _, p := range ps {
		if !n.busy[p] && p.Running() {
			out = append(out, p)
		}
	}
	return out
}

// inject starts one fault of kind, if a target is available; recovery runs
// in the background.
func (n *nemesis) inject(ctx context.Context, kind string) bool {
	n.mu.Lock()
	target := n.target(kind)
	if target == nil {
		n.mu.Unlock()
		return false
	}
	n.busy[target] = true
	n.counts[kind]++
	n.mu.Unlock()
	n.pending.Add(1)
	switch kind {
	case faultKillWriter, faultKillProjector, faultKillBroker:
		n.kill(target)
	case faultPauseWriter:
		n.pauseWriter(ctx, target)
	case faultTwinWriter:
		n.twinWriter(target)
	case faultPauseBroker:
		n.pauseBroker()
	case faultStallPostgres:
		n.stallPostgres(ctx)
	case faultCutWriterBroker, faultCutWriterPostgres, faultCutClientWriter, faultCutWriterWriter, faultCutProjectorBroker, faultCutAuditorClickHouse:
		n.cut(ctx, kind, target)
	case faultPauseProjector:
		d := n.draw(n.c.projPause)
		target.Pause()
		n.s.logf("SIGSTOP %s (pid %d) for %s", target.Name, target.PID(), d.Round(time.Millisecond))
		go n.recover(target, d, func() {
			target.Resume()
			n.s.logf("SIGCONT %s", target.Name)
		})
	}
	return true
}

// target picks the process a fault of kind hits, or nil; n.mu is held.
func (n *nemesis) target(kind string) *proc.Proc {
	switch kind {
	case faultKillWriter, faultPauseWriter, faultTwinWriter, faultCutWriterBroker, faultCutWriterPostgres, faultCutClientWriter, faultCutWriterWriter:
		h := n.healthy(n.s.writers)
		if n.busy[n.s.Broker] || n.busy[n.db] || len(h) < 2 {
			return nil // keep one writer serving
		}
		if kind == faultPauseWriter && slices.ContainsFunc(n.s.writers, func(w *proc.Proc) bool { return w.State() == proc.Paused }) {
			return nil // one zombie at a time
		}
		return h[n.intn(len(h))]
	case faultKillProjector, faultPauseProjector, faultCutProjectorBroker:
		h := n.healthy(n.s.projectors)
		if (len(h) < 2 && len(n.s.projectors) > 1) || len(h) == 0 {
			return nil // keep one projector applying
		}
		return h[n.intn(len(h))]
	case faultCutAuditorClickHouse:
		if a := n.s.auditor; a != nil && !n.busy[a] && a.Running() {
			return a
		}
		return nil
	case faultKillBroker:
		if len(n.busy) > 0 {
			return nil // the broker only when nothing else is down
		}
		return n.s.Broker
	case faultPauseBroker, faultStallPostgres:
		if n.busy[n.s.Broker] || n.busy[n.db] {
			return nil // one dependency at a time; other faults may run on
		}
		if kind == faultPauseBroker {
			return n.s.Broker
		}
		return n.db
	}
	return nil
}

// kill kills target and starts it again after a delay.
func (n *nemesis) kill(target *proc.Proc) {
	d := n.draw(n.c.restartIn)
	n.s.logf("SIGKILL %s (pid %d), restart in %s", target.Name, target.PID(), d.Round(time.Millisecond))
	target.Kill()
	go n.recover(target, d, func() {
		if err := target.Start(); err != nil {
			n.s.logf("restart %s: %v", target.Name, err)
			return
		}
		n.s.logf("restarted %s (pid %d)", target.Name, target.PID())
	})
}

// pauseWriter stops target long enough for its partitions to move, and
// records the owners before and after for the zombie check.
func (n *nemesis) pauseWriter(ctx context.Context, target *proc.Proc) {
	d := n.draw(n.c.writerPause)
	before, _ := n.owners(ctx)
	wp := logcheck.Pause{Writer: instanceID(target), Proc: target.Name, Before: before, Stopped: time.Now()}
	target.Pause()
	n.s.logf("SIGSTOP %s (pid %d, owns partitions %v) for %s", target.Name, target.PID(), ownedBy(before, wp.Writer), d.Round(time.Millisecond))
	go n.recover(target, d, func() {
		after, err := n.owners(context.Background())
		wp.After = after
		wp.Resumed = time.Now()
		wp.Complete = err == nil && before != nil
		target.Resume()
		n.s.logf("SIGCONT %s; partitions moved while it was stopped: %v", target.Name, sortedKeys(wp.Moved()))
		n.mu.Lock()
		n.pauses = append(n.pauses, wp)
		n.mu.Unlock()
	})
}

// twinWriter starts a second writer with target's static instance id
// while target runs on, as when a replacement starts before the process
// it replaces is gone (a pod rescheduled while the old one still runs):
// the group coordinator drops target's membership for the twin's at once,
// and the twin takes target's partitions while target, not knowing yet,
// may still answer reads under its read lease (writer/lease.go). The
// twin acknowledges writes only once that lease is over; the checks
// judge every read target answered meanwhile. After twinFor the twin is
// killed and target restarted (it was fenced by its twin).
func (n *nemesis) twinWriter(target *proc.Proc) {
	d := n.draw(twinFor)
	ports, err := proc.FreePorts(1)
	n.mu.Lock()
	n.twins++
	name := fmt.Sprintf("%s-twin%d", target.Name, n.twins)
	n.mu.Unlock()
	var twin *proc.Proc
	if err == nil {
		host := "127.0.0.1"
		node := n.s.nodes[target]
		if node != nil {
			host = node.ip // in its target's namespace
		}
		twin = n.s.Service(name, "writer", nil, n.s.writerEnv(host, ports[0], instanceID(target))...)
		if node != nil {
			twin.NetNS = node.ns
		}
		err = twin.Start()
	}
	if err != nil {
		n.s.logf("start a twin of %s: %v", target.Name, err)
		go n.recover(target, 0, func() {})
		return
	}
	n.s.logf("started %s (pid %d) beside %s (pid %d), with its instance id %s, for %s", name, twin.PID(), target.Name, target.PID(),
		instanceID(target), d.Round(time.Millisecond))
	go n.recover(target, d, func() {
		twin.Kill()
		target.Kill()
		if err := target.Start(); err != nil {
			n.s.logf("restart %s: %v", target.Name, err)
			return
		}
		n.s.logf("SIGKILL %s and %s; restarted %s (pid %d)", name, target.Name, target.Name, target.PID())
	})
}

// twinFor is how long a writer and its twin run side by side.
var twinFor = span{2 * time.Second, 6 * time.Second}

// recover runs fix after d, even when the fault phase ended meanwhile (a
// pause cut short would not test a zombie), and marks p healthy again.
func (n *nemesis) recover(p *proc.Proc, d time.Duration, fix func()) {
	defer n.pending.Done()
	select {
	case <-time.After(d):
	case <-n.s.closing:
		return // the stack stops every process anyway
	}
	fix()
	n.mu.Lock()
	delete(n.busy, p)
	n.mu.Unlock()
}

func (n *nemesis) owners(ctx context.Context) (map[int32]projection.Owner, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	o, err := n.s.store.Owners(ctx)
	if err != nil {
		n.s.logf("read partition owners: %v", err)
	}
	return o, err
}

// report returns the faults injected by kind and the writer pauses.
func (n *nemesis) report() (map[string]int, []logcheck.Pause) {
	n.mu.Lock()
	defer n.mu.Unlock()
	counts := map[string]int{}
	for k, v := range n.counts {
		counts[k] = v
	}
	return counts, append([]logcheck.Pause(nil), n.pauses...)
}

// instanceID is a writer's ESKV_WRITER_ID.
func instanceID(p *proc.Proc) string {
	for _, e := range p.Env {
		if v, ok := strings.CutPrefix(e, "ESKV_WRITER_ID="); ok {
			return v
		}
	}
	return ""
}

func ownedBy(owners map[int32]projection.Owner, id string) []int32 {
	var out []int32
	for p, o := range owners {
		if o.ID == id {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sortedKeys[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
