package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/internal/proc"
)

// throughputResult is one measured phase.
type throughputResult struct {
	name     string
	writers  int
	acked    int64
	failed   int64
	duration time.Duration
	load     string // the host's load average at the start and end
}

func (t throughputResult) perSecond() float64 { return float64(t.acked) / t.duration.Seconds() }

// runThroughput measures write throughput on the same stack with one
// writer (the others stopped gracefully, so it owns every partition), then
// with all writers, clients sending to a random writer (which forwards to
// the owner, as behind a load balancer), then with all writers, clients
// sending to the owner (routing by writer_owners). Same clients, same
// keys, same duration, no faults.
func runThroughput(ctx context.Context, c config, s *stack, stdout, stderr io.Writer) error {
	load0 := loadAvg()
	for _, w := range s.writers[1:] {
		w.Stop(20 * time.Second)
	}
	if err := s.waitOwnedBy(ctx, 90*time.Second, s.writers[0]); err != nil {
		return err
	}
	one, err := measure(ctx, c, s, "1 writer", s.writers[:1], false)
	if err != nil {
		return err
	}
	for _, w := range s.writers[1:] {
		if err := w.Start(); err != nil {
			return err
		}
	}
	if err := s.waitReady(ctx, 120*time.Second, true); err != nil {
		return err
	}
	anyW, err := measure(ctx, c, s, fmt.Sprintf("%d writers, clients send to any writer", len(s.writers)), s.writers, false)
	if err != nil {
		return err
	}
	owner, err := measure(ctx, c, s, fmt.Sprintf("%d writers, clients send to the owner", len(s.writers)), s.writers, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "eskvchaos -throughput: %d clients, unconditional PUTs of %d keys in %d projects, %s per phase, %d CPUs (load %s -> %s)\n",
		c.throughputClients, throughputKeys, throughputProjects, c.throughputDuration, runtime.NumCPU(), load0, loadAvg())
	for _, r := range []throughputResult{one, anyW, owner} {
		fmt.Fprintf(stdout, "  %-42s %8.0f writes/s (%d acknowledged, %d failed; host load %s)\n", r.name+":", r.perSecond(), r.acked, r.failed, r.load)
	}
	fmt.Fprintf(stdout, "ratio %d writers / 1 writer: %.2f (clients to any writer), %.2f (clients to the owner)\n",
		len(s.writers), anyW.perSecond()/one.perSecond(), owner.perSecond()/one.perSecond())
	return nil
}

const (
	throughputProjects = 64
	throughputKeys     = 1024
)

// waitOwnedBy waits until w owns every partition and is ready.
func (s *stack) waitOwnedBy(ctx context.Context, timeout time.Duration, w *proc.Proc) error {
	return proc.WaitFor(ctx, timeout, w.Name+" to own every partition", nil, func() bool {
		owners, err := s.store.Owners(ctx)
		if err != nil || len(owners) < int(s.topics.Partitions) {
			return false
		}
		for _, o := range owners {
			if o.Addr != w.URL {
				return false
			}
		}
		return proc.HTTPOK(w.URL + "/readyz")
	})
}

// measure runs the throughput clients against ws for a warm-up second and
// then the configured duration, counting acknowledged writes.
func measure(ctx context.Context, c config, s *stack, name string, ws []*proc.Proc, toOwner bool) (throughputResult, error) {
	s.logf("throughput: %s", name)
	l := &load{c: c, s: s, ws: ws, toOwner: toOwner, stop: make(chan struct{}), hc: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 256, DisableCompression: true}}}
	defer l.hc.CloseIdleConnections()
	l.refresh(ctx)
	var wg sync.WaitGroup
	for id := range c.throughputClients {
		wg.Go(func() { l.client(id) })
	}
	pause(ctx.Done(), 2*time.Second) // warm-up: connections, overlay, caches
	load0 := loadAvg()
	l.counting.Store(true)
	start := time.Now()
	tick := time.NewTicker(time.Second)
	deadline := time.After(c.throughputDuration)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-deadline:
			break loop
		case <-tick.C:
			l.refresh(ctx)
		}
	}
	tick.Stop()
	l.counting.Store(false)
	d := time.Since(start)
	close(l.stop)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return throughputResult{}, fmt.Errorf("interrupted: %w", err)
	}
	return throughputResult{name: name, writers: len(ws), acked: l.acked.Load(), failed: l.failed.Load(), duration: d,
		load: load0 + " -> " + loadAvg()}, nil
}

// load is the writing clients of one throughput measurement.
type load struct {
	c             config
	s             *stack
	ws            []*proc.Proc
	toOwner       bool // send to the partition's owner, not to a random writer
	hc            *http.Client
	stop          chan struct{}
	owners        atomic.Pointer[map[int32]string]
	counting      atomic.Bool
	acked, failed atomic.Int64
}

// refresh reads the partition owners.
func (l *load) refresh(ctx context.Context) {
	o, err := l.s.store.Owners(ctx)
	if err != nil {
		return
	}
	m := map[int32]string{}
	for p, ow := range o {
		m[p] = ow.Addr
	}
	l.owners.Store(&m)
}

// client PUTs random keys until stop is closed.
func (l *load) client(id int) {
	rng := rand.New(rand.NewPCG(l.c.seed, uint64(id)+1000))
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		k := rng.IntN(throughputKeys)
		scope := fmt.Sprintf("tenant/bench/project/p%d", k%throughputProjects)
		base := l.ws[rng.IntN(len(l.ws))].URL
		if m := l.owners.Load(); l.toOwner && m != nil {
			if a, ok := (*m)[changelog.Partition(scope, l.s.topics.Partitions)]; ok {
				base = a
			}
		}
		ok := l.put(fmt.Sprintf("%s/v1/kv/%s/k%d", base, scope, k), fmt.Sprintf(`{"value":{"c":%d,"i":%d}}`, id, i))
		if l.counting.Load() {
			if ok {
				l.acked.Add(1)
			} else {
				l.failed.Add(1)
			}
		}
		if !ok {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// put reports whether PUT url with body answered 200.
func (l *load) put(url, body string) bool {
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.hc.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// loadAvg is the host's 1-minute load average, or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
