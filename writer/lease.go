package writer

import (
	"context"
	"time"
)

// Read leases: a read answered without waiting for a fence.
//
// A read must see every write acknowledged before it began (docs/guarantees.md),
// so it needs a proof that no other writer acknowledged a
// write to its partition meanwhile. partition.confirm has two that cost
// a wait: the next round's group fence (accepted after the read arrived:
// this writer was then a member of the writer group, and the partition,
// ready throughout, was not handed on meanwhile; fence.go) or a
// ListOffsets showing no record beyond what this writer knows. Under a
// read-then-write load the read waits for a round in flight and then the
// next one: about half of every read-then-compare-and-swap cycle.
//
// A lease replaces that wait with a bound on time. When a round's fence
// sent at S (leaseNow, before the request left) is accepted at A, the
// writer holds a lease until S + ReadLease (the committer keeps S:
// Committer.LeaseSent, on the clock the writer gives it). A read of
// partition N is confirmed by the lease when, at some moment R after it
// began, N is ready (in the ownership that became ready at Q), Q ≤ S,
// and R < S + ReadLease. Why no other writer can have acknowledged a write to N
// before R:
//
//  1. Up to A, the fence's own proof: a member at A, with N ready since
//     Q ≤ S < A, was not dropped and did not revoke N since Q, so N was
//     not handed on.
//  2. After A, N moves to another writer only once this one revoked it
//     (revoke ends N's readiness before the group hands it on, so a read
//     that found N ready at R came before) or once the group dropped this
//     writer (its session timed out, its static instance id was taken by
//     a new process, an administrator removed it) — which this writer
//     may not know. The new owner learns of its assignment at O, after
//     the drop, hence after A and S. Every writer waits at least
//     ReadLease after the start O of an ownership before it serves it
//     (awaitLeases, takeoverWait), so the new owner acknowledges nothing
//     before O + ReadLease > S + ReadLease > R.
//
// What it assumes that the fences do not: that the writers' clocks run at
// nearly the same rate over a ReadLease (the bound is on durations, each
// measured by one process: no synchronised clocks), and that the clock
// counts every pause of the writer: SIGSTOP, a long garbage collection or
// a suspended machine (CLOCK_BOOTTIME on Linux; leaseclock_linux.go). A
// writer resumed from a pause longer than its lease finds the lease
// expired and confirms by a fence or the brokers, as before. It also
// assumes no writer of the group has a longer ReadLease than another's
// takeover wait (takeoverWait: its own lease, at least DefaultReadLease,
// leases off included), which would break point 2: the same value on
// every writer, or leases off on some and the default on the others.
//
// The price: a writer taking a partition serves it no sooner than
// takeoverWait after the ownership began (usually hidden by the catch-up),
// and a read outside any lease waits as before. A GET-only load, with no
// round to renew the lease, confirms with the brokers as before.

// DefaultReadLease is the default Config.ReadLease.
const DefaultReadLease = 500 * time.Millisecond

// monotonicNow is the monotonic clock in nanoseconds since the process
// started.
func monotonicNow() int64 { return int64(time.Since(processStart)) }

var processStart = time.Now()

// confirmByLease reports whether the writer's lease confirms a read of p
// now (see above).
func (p *partition) confirmByLease() bool {
	d := p.w.cfg.ReadLease
	if d <= 0 {
		return false
	}
	sent := p.w.committer.LeaseSent() // an accepted fence's leaseNow
	if sent == 0 {
		return false
	}
	p.mu.RLock()
	ok := p.ready && p.readySince <= sent
	p.mu.RUnlock()
	if !ok || leaseNow() >= sent+int64(d) {
		return false
	}
	p.w.metrics.confirmLease.Inc()
	return true
}

// takeoverWait is how long a writer waits after an ownership began
// before it serves the partition: its own ReadLease, and never less than
// DefaultReadLease, leases off included. A group's writers can then turn
// leases off or back on to the default one at a time (a rolling
// restart): a writer without leases still waits out the lease of a
// predecessor that has one. Going from a lease above the default to
// none takes two steps, through the default.
func (c *Config) takeoverWait() time.Duration {
	return max(c.ReadLease, DefaultReadLease)
}

// awaitLeases waits until takeoverWait after start, the moment the
// ownership began: until then an earlier owner, dropped from the group
// without knowing it, may still answer reads under its lease.
func (p *partition) awaitLeases(ctx context.Context, start int64) error {
	wait := time.Duration(start + int64(p.w.cfg.takeoverWait()) - leaseNow())
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
