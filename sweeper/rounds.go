package sweeper

import (
	"context"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
)

// sweep expires what is due on partition p, until nothing is or a round
// fails. Each expire is a compare-and-swap on the version that expired,
// decided in the partition's own queue like any write, so a renewal or
// delete that won the race is kept.
func (s *Sweeper) sweep(ctx context.Context, p Partition) error {
	var (
		start          = time.Now()
		expired, total int
	)
	defer func() {
		if total > 0 {
			took := time.Since(start)
			s.cfg.Seconds.Observe(took.Seconds())
			p.Log().Info("TTL sweep", "expired", expired, "skipped", total-expired, "took", took)
		}
	}()
	for {
		due, err := s.due(ctx, p, time.Now())
		if err != nil || len(due) == 0 {
			return err
		}
		n, err := s.expire(ctx, p, due)
		expired, total = expired+n, total+len(due)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil // everything due lost to a renewal: done for now
		}
	}
}

// due lists p's entries past their expiry at now: the overlay's (events
// the projection may not hold yet) and the projection's, where the
// overlay does not know better.
func (s *Sweeper) due(ctx context.Context, p Partition, now time.Time) (map[string]int64, error) {
	limit := s.cfg.Batch
	due := make(map[string]int64)
	known := make(map[string]bool)
	ready := p.Entries(func(k string, st keystate.State) {
		known[k] = true
		if st.Live && st.Entry.Expired(now) && len(due) < limit {
			due[k] = st.Version
		}
	})
	if !ready {
		return nil, nil
	}
	if len(due) >= limit {
		return due, nil
	}
	rows, err := s.proj.Expired(ctx, p.ID(), now, limit)
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

// expire submits one expire per due entry and counts those that expired.
func (s *Sweeper) expire(ctx context.Context, p Partition, due map[string]int64) (int, error) {
	cmds := make([]decide.Command, 0, len(due))
	for k, v := range due {
		key, err := contract.ParseKey(k)
		if err != nil {
			p.Log().Error("the projection holds a key that breaks the key rules; not expiring it", "key", k, "err", err)
			continue
		}
		cmds = append(cmds, &decide.KV{Header: decide.Header{Key: key, Op: contract.OpExpire, Principal: Principal}, ExpectedVersion: &v})
	}
	return s.submit(ctx, p, cmds, "expired")
}

// submit submits the sweeper's commands, at most Queued at a time so the
// partition's queue never overflows, and counts those accepted (outcome
// done; a version_conflict is a write that won the race: skipped).
func (s *Sweeper) submit(ctx context.Context, p Partition, cmds []decide.Command, done string) (int, error) {
	n := 0
	waits := make([]func(context.Context) error, 0, s.cfg.Queued)
	flush := func() error {
		defer func() { waits = waits[:0] }()
		for _, wait := range waits {
			err := wait(ctx) // ctx's error when ctx ended first
			switch {
			case err == nil:
				n++
				s.cfg.Swept.WithLabelValues(done).Inc()
			case contract.ErrorCode(err) == contract.EConflict:
				s.cfg.Swept.WithLabelValues("skipped").Inc()
			default:
				return err
			}
		}
		return nil
	}
	for _, c := range cmds {
		wait, err := p.Submit(c)
		if err != nil {
			return n, err
		}
		waits = append(waits, wait)
		if len(waits) == cap(waits) {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	return n, flush()
}

// requeue returns p's in-flight queue items past their visibility
// deadline to their queues, until none is due or a round fails: one
// qrequeue per item, decided in the partition's queue like any write
// against the item's current state, so an ack (or a requeue) that won
// the race is kept. Redelivery therefore follows a deadline by at most
// one Interval.
func (s *Sweeper) requeue(ctx context.Context, p Partition) error {
	for {
		due, err := s.dueItems(ctx, p, time.Now())
		if err != nil || len(due) == 0 {
			return err
		}
		n, err := s.submit(ctx, p, due, "requeued")
		if err != nil || n == 0 {
			return err // n == 0: everything due lost to an ack
		}
	}
}

// dueItems lists the qrequeues of p's in-flight queue items past their
// visibility deadline at now.
func (s *Sweeper) dueItems(ctx context.Context, p Partition, now time.Time) ([]decide.Command, error) {
	return s.items(p, contract.OpQRequeue, func(el *contract.Element) bool {
		return el.State == decide.ItemInFlight && el.VisibleAt != nil && !now.Before(*el.VisibleAt)
	}, func(limit int) ([]projection.DueItem, error) { return s.proj.DueItems(ctx, p.ID(), now, limit) })
}

// expireItems removes p's ready and in-flight queue items whose own TTL
// passed, until none is due or a round fails: one qexpire per item,
// decided in the partition's queue like any write against the item's
// current state, so a pop or ack that won the race is kept. Pops and
// peeks skip such items at once; the sweeper makes the removal a fact
// (size and inFlight drop) at most one Interval after it.
func (s *Sweeper) expireItems(ctx context.Context, p Partition) error {
	for {
		due, err := s.expiredItems(ctx, p, time.Now())
		if err != nil || len(due) == 0 {
			return err
		}
		n, err := s.submit(ctx, p, due, "expired_items")
		if err != nil || n == 0 {
			return err // n == 0: everything due lost to pops and acks
		}
	}
}

// expiredItems lists the qexpires of p's ready and in-flight items past
// their own TTL at now.
func (s *Sweeper) expiredItems(ctx context.Context, p Partition, now time.Time) ([]decide.Command, error) {
	return s.items(p, contract.OpQExpire, func(el *contract.Element) bool {
		return (el.State == decide.ItemReady || el.State == decide.ItemInFlight) && decide.ItemExpired(el, now)
	}, func(limit int) ([]projection.DueItem, error) { return s.proj.ExpiredItems(ctx, p.ID(), now, limit) })
}

// items lists at most Batch sweeper writes op of p's queue items: those
// of the overlay (events the projection may not hold yet) for which due
// holds, then those the projection lists (rows) that the overlay does
// not know better. A qrequeue names the delivery it ends.
func (s *Sweeper) items(p Partition, op contract.Op, due func(*contract.Element) bool, rows func(limit int) ([]projection.DueItem, error)) ([]decide.Command, error) {
	limit := s.cfg.Batch
	var cmds []decide.Command
	add := func(queue, member string, deliveries int64) {
		key, err := contract.ParseKey(queue)
		if err == nil && len(cmds) < limit {
			q := &decide.Queue{Header: decide.Header{Key: key, Op: op, Principal: Principal}, Item: member}
			if op == contract.OpQRequeue {
				q.Delivery = deliveries
			}
			cmds = append(cmds, q)
		}
	}
	// known holds the overlay's members by queue, copied: the partition's
	// goroutine changes an entry's items in place under the write lock,
	// and known is read after the lock is released.
	known := make(map[string]map[string]struct{})
	ready := p.Items(func(queue, member string, el *contract.Element) {
		members := known[queue]
		if members == nil {
			members = make(map[string]struct{})
			known[queue] = members
		}
		members[member] = struct{}{}
		if due(el) {
			add(queue, member, el.Deliveries)
		}
	})
	if !ready {
		return nil, nil
	}
	if len(cmds) >= limit {
		return cmds, nil
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
	return cmds, nil
}
