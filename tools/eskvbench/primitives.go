package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// Targets of the coordination figures.
const (
	targetLockP50  = 5 * time.Millisecond
	targetSweepFor = time.Second
	// sweepEntries is how many expiring entries figure 9 writes.
	sweepEntries = 10000
)

// primitives measures figures 9 (lock acquire/release) and 10 (the TTL
// sweeper expiring sweepEntries entries).
func (b *bench) primitives(ctx context.Context, rep *report) error {
	c := client.New(b.s.writerURL, b.s.token, client.WithHTTPClient(b.hc))
	if b.c.wants("9") {
		b.logf("9 lock acquire + release, 1 client x %d", b.c.n/2)
		acq, rel := b.locks(ctx, c, b.c.n/2)
		rep.add(acq)
		rep.add(rel)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if b.c.wants("10") {
		b.logf("10 TTL sweeper: %d entries expiring in one project", sweepEntries)
		rep.add(b.sweeper(ctx, c))
	}
	return ctx.Err()
}

// locks times n acquire/release pairs on one lock.
func (b *bench) locks(ctx context.Context, c *client.Client, n int) (result, result) {
	key := b.key("locks-"+b.runID, "deploy")
	var acq, rel latencies
	errs := errorCounts{}
	start := time.Now()
	for range n {
		t0 := time.Now()
		_, err := c.AcquireLock(ctx, client.LockRequest{Key: key, Holder: "bench", TTL: 30 * time.Second})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			errs[statusOf(err)]++
			continue
		}
		t1 := time.Now()
		_, err = c.ReleaseLock(ctx, client.LockRequest{Key: key, Holder: "bench"})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			errs[statusOf(err)]++
			continue
		}
		acq, rel = append(acq, t1.Sub(t0)), append(rel, time.Since(t1))
	}
	elapsed := time.Since(start)
	a := newResult("9a", "lock acquire, 1 client", summarize(acq), errs, elapsed)
	a.target(targetP50, targetLockP50)
	a.Note = "each acquire starts a new tenure (fencing token = its version); no contention"
	r := newResult("9b", "lock release, 1 client", summarize(rel), errorCounts{}, elapsed)
	r.target(targetP50, targetLockP50)
	return a, r
}

// statusOf maps a client error to the HTTP status the bench's error
// counts use (0: no answer).
func statusOf(err error) int {
	switch contract.ErrorCode(err) {
	case contract.EUnavailable, contract.EOutcomeUnknown:
		return 503
	case contract.ELockHeld, contract.ENotLockHolder, contract.EConflict:
		return 409
	case contract.EInternal:
		return 500
	}
	return 0
}

// sweeper writes sweepEntries entries with a short TTL into one project
// (one partition, one sweeper), waits until the sweeper expired them all,
// and reports the sweeper's own time: the sum of its rounds, from the
// writer's eskv_writer_sweep_seconds histogram.
func (b *bench) sweeper(ctx context.Context, c *client.Client) result {
	r := result{Step: "10", Title: fmt.Sprintf("TTL sweeper, %d expiring entries", sweepEntries)}
	before := b.scrape(ctx, b.s.writerURL)
	if before == nil {
		r.Verdict, r.Note = verdictSkip, "could not read the writer's /metrics"
		return r
	}
	prefix := b.key("ttl-"+b.runID, "lease/")
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	written := time.Now()
	for range 32 {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= sweepEntries {
					return
				}
				_, err := c.Put(ctx, client.PutRequest{Key: fmt.Sprintf("%s%05d", prefix, i), Value: json.RawMessage(`true`),
					TTL: 2 * time.Second, Semantics: contract.Semantics{Purpose: "feature_flag", Producer: "eskvbench"},
					RequestID: fmt.Sprintf("ttl-%d", i)})
				if err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	writeTime := time.Since(written)
	if n := failed.Load(); n > 0 {
		r.Verdict, r.Note = verdictMiss, fmt.Sprintf("%d of %d writes failed", n, sweepEntries)
		return r
	}
	want := before.sum("eskv_writer_swept_total", `outcome="expired"`) + sweepEntries
	deadline := time.Now().Add(60 * time.Second)
	var after metrics
	for {
		after = b.scrape(ctx, b.s.writerURL)
		if after.sum("eskv_writer_swept_total", `outcome="expired"`) >= want || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	expired := int(after.sum("eskv_writer_swept_total", `outcome="expired"`) - (want - sweepEntries))
	busy := after.sum("eskv_writer_sweep_seconds_sum") - before.sum("eskv_writer_sweep_seconds_sum")
	rounds := after.sum("eskv_writer_sweep_seconds_count") - before.sum("eskv_writer_sweep_seconds_count")
	r.Ops, r.Seconds = expired, busy
	if busy > 0 {
		r.OpsPerSec = float64(expired) / busy
	}
	r.Target = "sweeper time < " + targetSweepFor.String()
	r.Verdict = verdictMiss
	if expired >= sweepEntries && busy < targetSweepFor.Seconds() {
		r.Verdict = verdictPass
	}
	r.Note = fmt.Sprintf("%d expired of %d written (TTL 2 s, written in %s); sweeper busy %s over %.0f rounds (sum of eskv_writer_sweep_seconds), %.0f expires/s of sweeper time",
		expired, sweepEntries, fmtDuration(writeTime), fmtSeconds(busy), rounds, r.OpsPerSec)
	return r
}
