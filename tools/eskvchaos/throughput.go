package main

import (
	"bytes"
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

	"github.com/eskv/eskv/events"
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
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 512, MaxIdleConnsPerHost: 256, DisableCompression: true,
	}}
	defer hc.CloseIdleConnections()
	var owners atomic.Pointer[map[int32]string]
	refresh := func() {
		o, err := s.store.Owners(ctx)
		if err != nil {
			return
		}
		m := map[int32]string{}
		for p, ow := range o {
			m[p] = ow.Addr
		}
		owners.Store(&m)
	}
	refresh()
	var counting atomic.Bool
	var acked, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for id := range c.throughputClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(c.seed, uint64(id)+1000))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := rng.IntN(throughputKeys)
				scope := fmt.Sprintf("tenant/bench/project/p%d", k%throughputProjects)
				key := fmt.Sprintf("%s/k%d", scope, k)
				base := ws[rng.IntN(len(ws))].URL
				if toOwner {
					if m := owners.Load(); m != nil {
						if a, ok := (*m)[events.Partition(scope, s.topics.Partitions)]; ok {
							base = a
						}
					}
				}
				req, _ := http.NewRequest(http.MethodPut, base+"/v1/kv/"+key, bytes.NewReader([]byte(fmt.Sprintf(`{"value":{"c":%d,"i":%d}}`, id, i))))
				req.Header.Set("Authorization", "Bearer "+s.token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				ok := err == nil && resp.StatusCode == http.StatusOK
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if counting.Load() {
					if ok {
						acked.Add(1)
					} else {
						failed.Add(1)
					}
				}
				if !ok {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	pause(ctx.Done(), 2*time.Second) // warm-up: connections, overlay, caches
	load0 := loadAvg()
	counting.Store(true)
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
			refresh()
		}
	}
	tick.Stop()
	counting.Store(false)
	d := time.Since(start)
	close(stop)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return throughputResult{}, fmt.Errorf("interrupted: %w", err)
	}
	return throughputResult{name: name, writers: len(ws), acked: acked.Load(), failed: failed.Load(), duration: d, load: load0 + " -> " + loadAvg()}, nil
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
