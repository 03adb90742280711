package main

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The machine probe tells a slower machine from a slower eskv. While a
// measured run drives its load, a goroutine of its own thread does a
// fixed piece of work every probeEvery and times it on that thread's CPU
// clock: time spent waiting for a CPU does not count, so the load itself
// does not move it, but a host that slows every instruction does (its
// clock, another tenant's share of the caches and memory, which shows
// as no steal). Two pieces: SHA-256 of probeHashBytes (the core's own
// speed) and a walk of probeWalkSteps through a random cycle of
// probeWalkBytes (the memory's latency). The load generator's CPU per
// write, the earlier control, moves with the system's latency too (fewer
// answers per wake-up when each takes longer), so it cannot tell the two
// apart.
const (
	probeEvery     = time.Second
	probeHashBytes = 1 << 20
	probeWalkBytes = 32 << 20
	probeWalkSteps = 100_000
)

// machineSpeed is the probe's medians over a run: the core's CPU time
// per KiB hashed and the memory's per step walked, in ns.
type machineSpeed struct {
	HashNsPerKiB float64 `json:"hashNsPerKiB"`
	WalkNs       float64 `json:"walkNsPerStep"`
	Samples      int     `json:"samples"`
}

// speedProbe is a running probe: stop ends it and returns its medians.
type speedProbe struct {
	stop chan struct{}
	out  chan machineSpeed
}

// startProbe starts probing until stop.
func startProbe() *speedProbe {
	p := &speedProbe{stop: make(chan struct{}), out: make(chan machineSpeed, 1)}
	go p.run()
	return p
}

func (p *speedProbe) run() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf, next := make([]byte, probeHashBytes), probeCycle()
	var hash, walk []float64
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			p.out <- machineSpeed{HashNsPerKiB: median(hash), WalkNs: median(walk), Samples: len(hash)}
			return
		case <-tick.C:
		}
		t0 := threadCPU()
		sha256.Sum256(buf)
		t1 := threadCPU()
		var at uint32
		for range probeWalkSteps {
			at = next[at]
		}
		t2 := threadCPU()
		if t0 < 0 || t2 < 0 || at == ^uint32(0) { // at: keeps the walk from being optimized away
			continue
		}
		hash = append(hash, float64(t1-t0)/(probeHashBytes/1024))
		walk = append(walk, float64(t2-t1)/probeWalkSteps)
	}
}

// finish stops the probe and returns its medians (zero without a sample).
func (p *speedProbe) finish() machineSpeed {
	close(p.stop)
	return <-p.out
}

// probeCycle is the probe's walk, made once per process: making it (8
// million slots) takes about a tenth of a second of CPU, which every
// measured run would otherwise spend at its start.
var probeCycle = sync.OnceValue(func() []uint32 {
	return walkCycle(probeWalkBytes/4, rand.New(rand.NewPCG(1, 2)))
})

// walkCycle returns next, a single cycle through all n slots in random
// order (Sattolo's algorithm): following it from any slot visits every
// other before coming back, so the hardware cannot guess the next one.
func walkCycle(n int, r *rand.Rand) []uint32 {
	next := make([]uint32, n)
	for i := range next {
		next[i] = uint32(i)
	}
	for i := n - 1; i > 0; i-- {
		j := r.IntN(i)
		next[i], next[j] = next[j], next[i]
	}
	return next
}

// threadCPU is the calling thread's CPU time in ns, -1 if unreadable.
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return -1
	}
	return ts.Nano()
}

// median of xs (0 when empty).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// ratio is m's time over before's for each piece, "hash 1.02, memory
// 1.10": above 1, the machine was slower.
func (m machineSpeed) ratio(before machineSpeed) string {
	if before.HashNsPerKiB == 0 || before.WalkNs == 0 || m.Samples == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f (hash), %.2f (memory)", m.HashNsPerKiB/before.HashNsPerKiB, m.WalkNs/before.WalkNs)
}
