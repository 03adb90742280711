package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/eskv/eskv/client"
)

// Figures 16 and 17: watches (docs/watch.md).
const (
	// watchRate is the write rate of figure 16.
	watchRate = 1000
	// targetDeliveryP99 bounds the time from a write's acknowledgement
	// to its event reaching a watcher (figure 16).
	targetDeliveryP99 = 50 * time.Millisecond
	// idleWatchers is how many watchers figure 17 opens.
	idleWatchers = 200
	// idleSlowdown is how much slower writes may be with the idle
	// watchers open (figure 17): 10%.
	idleSlowdown = 0.10
)

// watches measures figures 16 and 17.
func (b *bench) watches(ctx context.Context, rep *report) error {
	if b.c.wants("16") {
		b.logf("16 watch delivery: %d writes/s for %s, one watcher of their prefix", watchRate, b.c.duration)
		rep.add(b.watchDelivery(ctx))
	}
	if err := ctx.Err(); err != nil || !b.c.wants("17") {
		return err
	}
	b.logf("17 writes with 0 and with %d idle watchers, %d clients, 2 × 2 runs of %s", idleWatchers, b.c.clients, b.c.duration/2)
	rs, err := b.idleWatches(ctx)
	rep.Results = append(rep.Results, rs...)
	return err
}

// watchDelivery is figure 16: writes paced at watchRate/s to keys of one
// prefix, each acknowledgement's time against the time its event reached
// a watcher of the prefix (Go client, SSE).
func (b *bench) watchDelivery(ctx context.Context) result {
	project := "watch-" + b.runID
	prefix := b.key(project, "")
	c := client.New(b.s.writerURL, b.s.token)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	received := map[string]time.Time{}
	started := make(chan struct{})
	var once sync.Once
	go func() {
		for ev, err := range c.Watch(wctx, client.WatchOptions{Prefix: prefix}) {
			if err != nil {
				return
			}
			mu.Lock()
			received[fmt.Sprintf("%s@%d", ev.Key, ev.Version)] = time.Now()
			mu.Unlock()
			once.Do(func() { close(started) })
		}
	}()
	// Writes to another key until the first event proves the watch is
	// following.
	warm := &writeState{key: b.key(project, "warm")}
	for i := 0; i < 100; i++ {
		if _, err := b.cas(ctx, warm); err != nil {
			break
		}
		select {
		case <-started:
			i = 100
		case <-time.After(100 * time.Millisecond):
		}
	}
	acked, errs, elapsed := b.pacedWrites(ctx, project, watchRate, b.c.duration)
	time.Sleep(time.Second) // the last events' delivery
	stop()
	mu.Lock()
	defer mu.Unlock()
	var lat latencies
	missing, early := 0, 0
	for k, at := range acked {
		got, ok := received[k]
		switch {
		case !ok:
			missing++
		case got.Before(at):
			early++ // the event outran the answer
			lat = append(lat, 0)
		default:
			lat = append(lat, got.Sub(at))
		}
	}
	r := newResult("16", fmt.Sprintf("watch delivery: write acknowledged → event received, %d writes/s", watchRate), summarize(lat), errs, elapsed)
	r.OpsPerSec = float64(len(acked)) / elapsed.Seconds()
	r.target(targetP99, targetDeliveryP99)
	if missing > 0 {
		r.Verdict = verdictMiss
	}
	r.Note = fmt.Sprintf("%.0f writes/s acknowledged; %d events not received within 1 s of the end; %d received before their write's answer (counted 0)",
		r.OpsPerSec, missing, early)
	return r
}

// pacedWrites writes keys of project at rate/s for d from 16 clients,
// each sending on its own schedule; it returns when each write (key@version)
// was acknowledged.
func (b *bench) pacedWrites(ctx context.Context, project string, rate int, d time.Duration) (map[string]time.Time, errorCounts, time.Duration) {
	const clients = 16
	var mu sync.Mutex
	acked := map[string]time.Time{}
	errs := make([]errorCounts, clients)
	var wg sync.WaitGroup
	start := time.Now()
	interval := time.Second * clients / time.Duration(rate)
	for i := range clients {
		errs[i] = errorCounts{}
		st := &writeState{key: b.key(project, fmt.Sprintf("k%02d", i))}
		wg.Go(func() {
			next := start.Add(interval * time.Duration(i) / clients)
			for ctx.Err() == nil && next.Before(start.Add(d)) {
				time.Sleep(time.Until(next))
				next = next.Add(interval)
				status, err := b.cas(ctx, st)
				at := time.Now()
				if errs[i].failed(ctx, status, err, true) {
					continue
				}
				mu.Lock()
				acked[fmt.Sprintf("%s@%d", st.key, st.version)] = at
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	all := errorCounts{}
	for _, e := range errs {
		all.merge(e)
	}
	return acked, all, time.Since(start)
}

// idleWatches is figure 17: figure 2a's writes (b.c.clients clients over
// every partition) without watchers and with idleWatchers watchers open
// on other prefixes of the same projects, so every record of the written
// partitions passes their tailers and is filtered out. Runs alternate
// (0, N, 0, N) to spread the machine's drift over both.
func (b *bench) idleWatches(ctx context.Context) ([]result, error) {
	spread, _ := b.spreadProjects()
	half := b.c
	half.duration = b.c.duration / 2
	hb := *b
	hb.c = half
	var without, with []result
	for round := range 2 {
		w, _, err := hb.concurrentWrites(ctx, "17a", spread, false)
		if err != nil {
			return nil, err
		}
		without = append(without, w)
		closeWatchers, err := b.openIdleWatchers(ctx, spread, round)
		if err != nil {
			return nil, err
		}
		w, _, err = hb.concurrentWrites(ctx, "17b", spread, false)
		closeWatchers()
		if err != nil {
			return nil, err
		}
		with = append(with, w)
	}
	a, z := mergeRuns("17a", fmt.Sprintf("write, %d clients, 0 watchers", b.c.clients), without),
		mergeRuns("17b", fmt.Sprintf("write, %d clients, %d idle watchers", b.c.clients, idleWatchers), with)
	ratio := z.OpsPerSec / a.OpsPerSec
	z.Target = fmt.Sprintf("throughput ≥ %.0f%% of 17a, p50 ≤ %.0f%% of it", 100*(1-idleSlowdown), 100*(1+idleSlowdown))
	z.Verdict = verdictMiss
	if ratio >= 1-idleSlowdown && float64(z.P50) <= (1+idleSlowdown)*float64(a.P50) {
		z.Verdict = verdictPass
	}
	z.Note = fmt.Sprintf("throughput %.1f%% of 17a, p50 %.1f%%, p99 %.1f%%", 100*ratio,
		100*float64(z.P50)/float64(a.P50), 100*float64(z.P99)/float64(a.P99))
	return []result{a, z}, nil
}

// mergeRuns sums runs of one figure: ops and time add up; the
// percentiles are the runs' averages (each run has the same length).
func mergeRuns(step, title string, rs []result) result {
	m := result{Step: step, Title: title}
	for _, r := range rs {
		m.Ops += r.Ops
		m.Errors += r.Errors
		m.Seconds += r.Seconds
		m.P50 += r.P50 / ms(len(rs))
		m.P99 += r.P99 / ms(len(rs))
		m.Max = max(m.Max, r.Max)
	}
	if m.Seconds > 0 {
		m.OpsPerSec = float64(m.Ops) / m.Seconds
	}
	return m
}

// openIdleWatchers opens idleWatchers watches of prefixes nobody writes,
// in the projects (so the partitions) that are written, and returns once
// every one is streaming; the returned function closes them.
func (b *bench) openIdleWatchers(ctx context.Context, projects []string, round int) (func(), error) {
	wctx, cancel := context.WithCancel(ctx)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: idleWatchers}}
	var wg sync.WaitGroup
	opened := make(chan error, idleWatchers)
	for i := range idleWatchers {
		prefix := b.key(projects[i%len(projects)], fmt.Sprintf("idle-%d-%d/", round, i))
		wg.Go(func() {
			req, err := http.NewRequestWithContext(wctx, http.MethodGet, b.s.writerURL+"/v1/watch?prefix="+url.QueryEscape(prefix), nil)
			if err != nil {
				opened <- err
				return
			}
			req.Header.Set("Authorization", b.auth)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := hc.Do(req)
			if err != nil {
				opened <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				opened <- fmt.Errorf("watch %s: %s", prefix, resp.Status)
				return
			}
			opened <- nil
			_, _ = io.Copy(io.Discard, resp.Body)
		})
	}
	closeAll := func() {
		cancel()
		wg.Wait()
		hc.CloseIdleConnections()
	}
	for range idleWatchers {
		if err := <-opened; err != nil {
			closeAll()
			return nil, fmt.Errorf("figure 17: %w", err)
		}
	}
	return closeAll, nil
}
