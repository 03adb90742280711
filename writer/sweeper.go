package writer

import (
	"context"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
)

// SweeperPrincipal is the identity under which the TTL sweeper appends
// expire events (their principal and lastWriter).
const SweeperPrincipal = "eskv-sweeper"

// sweep runs the TTL sweeper until ctx ends: every SweepInterval, each
// partition this writer owns and has caught up expires its entries past
// their expiry, and returns its queues' in-flight items past their
// visibility deadline to their queues (requeue), and removes the items
// whose own TTL passed (qexpire). Reads hide such entries at once; the expire event makes
// the removal a fact in the log (for subscribers and the audit trail).
func (w *Writer) sweep(ctx context.Context) {
	if w.cfg.SweepInterval < 0 {
		return
	}
	t := time.NewTicker(w.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.RLock()
		parts := make([]*partition, 0, len(w.parts))
		for _, p := range w.parts {
			parts = append(parts, p)
		}
		w.mu.RUnlock()
		for _, p := range parts {
			if err := p.sweep(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("TTL sweep incomplete; the next round goes on", "err", err)
			}
			if err := p.requeue(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("queue requeue sweep incomplete; the next round goes on", "err", err)
			}
			if err := p.expireItems(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("queue item expiry sweep incomplete; the next round goes on", "err", err)
			}
		}
	}
}

// sweep expires what is due on the partition, until nothing is or a
// round fails. Each expire is a compare-and-swap on the version that
// expired, decided in the partition's own queue like any write, so a
// renewal or delete that won the race is kept.
func (p *partition) sweep(ctx context.Context) error {
	var (
		start          = time.Now()
		expired, total int
	)
	defer func() {
		if total > 0 {
			took := time.Since(start)
			p.w.metrics.sweepSeconds.Observe(took.Seconds())
			p.log.Info("TTL sweep", "expired", expired, "skipped", total-expired, "took", took)
		}
	}()
	for {
		due, err := p.due(ctx, time.Now())
		if err != nil || len(due) == 0 {
			return err
		}
		n, err := p.expire(ctx, due)
		expired, total = expired+n, total+len(due)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil // everything due lost to a renewal: done for now
		}
	}
}

// due lists the partition's entries past their expiry at now: the
// overlay's (events the projection may not hold yet) and the
// projection's, where the overlay does not know better.
func (p *partition) due(ctx context.Context, now time.Time) (map[string]int64, error) {
	limit := p.w.cfg.SweepBatch
	due := make(map[string]int64)
	p.mu.RLock()
	if !p.ready {
		p.mu.RUnlock()
		return nil, nil
	}
	known := make(map[string]bool, len(p.overlay))
	for k, e := range p.overlay {
		known[k] = true
		if e.state.Live && e.state.Entry.Expired(now) && len(due) < limit {
			due[k] = e.state.Version
		}
	}
	p.mu.RUnlock()
	if len(due) >= limit {
		return due, nil
	}
	rows, err := p.w.proj.Expired(ctx, p.id, now, limit)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if !known[r.Key] && len(due) < limit {
			due[r.Key] = r.Version
		}
	}
	return due, nil
}

// expire submits one expire request per due entry and counts those that
// expired.
func (p *partition) expire(ctx context.Context, due map[string]int64) (int, error) {
	reqs := make([]decide.Command, 0, len(due))
	for k, v := range due {
		key, err := contract.ParseKey(k)
		if err != nil {
			p.log.Error("the projection holds a key that breaks the key rules; not expiring it", "key", k, "err", err)
			continue
		}
		reqs = append(reqs, &decide.KV{Header: decide.Header{Key: key, Op: contract.OpExpire, Principal: SweeperPrincipal}, ExpectedVersion: &v})
	}
	return p.submitSweep(ctx, reqs, "expired")
}

// submitSweep submits the sweeper's requests, at most MaxBatch at a time
// so the queue never overflows, and counts those accepted (outcome done;
// a version_conflict is a write that won the race: skipped).
func (p *partition) submitSweep(ctx context.Context, reqs []decide.Command, done string) (int, error) {
	n := 0
	calls := make([]*call, 0, p.w.cfg.MaxBatch)
	flush := func() error {
		defer func() { calls = calls[:0] }()
		for _, c := range calls {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case a := <-c.done:
				switch {
				case a.err == nil:
					n++
					p.w.metrics.swept.WithLabelValues(done).Inc()
				case contract.ErrorCode(a.err) == contract.EConflict:
					p.w.metrics.swept.WithLabelValues("skipped").Inc()
				default:
					return a.err
				}
			}
		}
		return nil
	}
	for _, r := range reqs {
		c := &call{cmd: r, done: make(chan answer, 1)}
		if err := p.submit(c); err != nil {
			return n, err
		}
		calls = append(calls, c)
		if len(calls) == cap(calls) {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	return n, flush()
}

// requeue returns the partition's in-flight queue items past their
// visibility deadline to their queues, until none is due or a round
// fails: one requeue request per item, decided in the partition's queue
// like any write against the item's current state, so an ack (or a
// requeue) that won the race is kept. Redelivery therefore follows a
// deadline by at most one SweepInterval.
func (p *partition) requeue(ctx context.Context) error {
	for {
		due, err := p.dueItems(ctx, time.Now())
		if err != nil || len(due) == 0 {
			return err
		}
		n, err := p.submitSweep(ctx, due, "requeued")
		if err != nil || n == 0 {
			return err // n == 0: everything due lost to an ack
		}
	}
}

// dueItems lists the qrequeue requests of the partition's in-flight
// queue items past their visibility deadline at now: the overlay's
// (events the projection may not hold yet) and the projection's, where
// the overlay does not know better.
func (p *partition) dueItems(ctx context.Context, now time.Time) ([]decide.Command, error) {
	return p.sweepItems(ctx, contract.OpQRequeue, func(el *contract.Element) bool {
		return el.State == contract.ItemInFlight && el.VisibleAt != nil && !now.Before(*el.VisibleAt)
	}, func(limit int) ([]projection.DueItem, error) { return p.w.proj.DueItems(ctx, p.id, now, limit) })
}

// expireItems removes the partition's ready and in-flight queue items
// whose own TTL passed, until none is due or a round fails: one qexpire
// per item, decided in the partition's queue like any write against the
// item's current state, so a pop or ack that won the race is kept. Pops
// and peeks skip such items at once; the sweeper makes the removal a
// fact (size and inFlight drop) at most one SweepInterval after it.
func (p *partition) expireItems(ctx context.Context) error {
	for {
		due, err := p.expiredItems(ctx, time.Now())
		if err != nil || len(due) == 0 {
			return err
		}
		n, err := p.submitSweep(ctx, due, "expired_items")
		if err != nil || n == 0 {
			return err // n == 0: everything due lost to pops and acks
		}
	}
}

// expiredItems lists the qexpire requests of the partition's ready and
// in-flight items past their own TTL at now: the overlay's (unprojected
// item changes) and the projection's, where the overlay does not know
// better.
func (p *partition) expiredItems(ctx context.Context, now time.Time) ([]decide.Command, error) {
	return p.sweepItems(ctx, contract.OpQExpire, func(el *contract.Element) bool {
		return (el.State == contract.ItemReady || el.State == contract.ItemInFlight) && el.ItemExpired(now)
	}, func(limit int) ([]projection.DueItem, error) { return p.w.proj.ExpiredItems(ctx, p.id, now, limit) })
}

// sweepItems lists at most SweepBatch sweeper requests op for the
// partition's queue items: those of the overlay for which due holds, then
// those the projection lists (rows) that the overlay does not know
// better. A qrequeue names the delivery it ends.
func (p *partition) sweepItems(ctx context.Context, op contract.Op, due func(*contract.Element) bool, rows func(limit int) ([]projection.DueItem, error)) ([]decide.Command, error) {
	limit := p.w.cfg.SweepBatch
	var reqs []decide.Command
	add := func(queue, member string, deliveries int64) {
		key, err := contract.ParseKey(queue)
		if err == nil && len(reqs) < limit {
			r := &decide.Queue{Header: decide.Header{Key: key, Op: op, Principal: SweeperPrincipal}, Item: member}
			if op == contract.OpQRequeue {
				r.Delivery = deliveries
			}
			reqs = append(reqs, r)
		}
	}
	p.mu.RLock()
	if !p.ready {
		p.mu.RUnlock()
		return nil, nil
	}
	// known holds the overlay's members by queue, copied: the partition's
	// goroutine changes an entry's items in place under the write lock
	// (withItem), and known is read after the lock is released.
	known := make(map[string]map[string]struct{})
	for k, e := range p.overlay {
		if e.items == nil {
			continue
		}
		members := make(map[string]struct{}, len(e.items))
		known[k] = members
		for m, it := range e.items {
			members[m] = struct{}{}
			if el := it.el; due(&el) {
				add(k, m, el.Deliveries)
			}
		}
	}
	p.mu.RUnlock()
	if len(reqs) >= limit {
		return reqs, nil
	}
	rs, err := rows(limit)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if _, in := known[r.Queue][r.Member]; !in {
			add(r.Queue, r.Member, r.Deliveries)
		}
	}
	return reqs, nil
}
