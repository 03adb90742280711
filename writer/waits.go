package writer

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// Blocking waits (docs/design-notes/waits.md): a pop of an empty queue
// or list, or an acquire of a held lock, that carries a wait is parked
// by the partition that owns its key instead of being answered, in its
// key's queue of waiters, in arrival order. Any commit of an event of
// the key (a push, a pop, a release, a delete, an expiry, the end of a
// session) hands waiters back to the next batch, ahead of the calls
// queued meanwhile, where they are decided again like any call: a grant
// is an ordinary acquire event, a pop an ordinary pop. A lock whose lease
// runs out wakes its head waiter by a timer at its expiresAt (expiry is
// virtual at decision time; the sweeper's event comes up to a sweep
// interval later). Only the partition goroutine parks and wakes; a
// caller whose wait ends takes its call out of the queue (abandon) under
// the same lock, unless the call is being decided again, whose answer
// then comes.

// waitState is where a waiting call stands.
type waitState uint8

const (
	// waitDeciding: submitted or woken, in a batch; its answer comes.
	waitDeciding waitState = iota
	// waitParked: in its key's queue, waiting for a wake.
	waitParked
	// waitGone: answered, abandoned, or its ownership ended.
	waitGone
)

// waiter is the wait of a call (DoWait).
type waiter struct {
	until time.Time
	state waitState // partition.wmu
	// refusal is the decision the call parked on: its answer when its
	// wait ends (queue_empty, not_found, lock_held).
	refusal error
}

// keyWaiters is a key's queue of waiting calls, in arrival order.
type keyWaiters struct {
	calls []*call
	// timer wakes the head at a held lock's expiry (at: when).
	timer *time.Timer
	at    time.Time
}

// waitable reports whether a decision's refusal is one a wait waits out:
// an empty queue or list, a held lock.
func waitable(cmd decide.Command, err error) bool {
	switch contract.ErrorCode(err) {
	case contract.EQueueEmpty:
		return true
	case contract.ENotFound:
		_, ok := cmd.(*decide.List)
		return ok
	case contract.ELockHeld:
		_, ok := cmd.(*decide.Lock)
		return ok
	}
	return false
}

// isLockWait: a lock's waiters are granted one at a time, the head
// first; a queue's or list's are woken as many as events arrived.
func isLockWait(cmd decide.Command) bool {
	_, ok := cmd.(*decide.Lock)
	return ok
}

// DoWait is Do for a pop or an acquire that may wait up to wait for an
// item or the lock (contract.Waits): when its decision is an empty queue
// or list or a held lock, the partition parks it until a commit of its
// key (or the lock's expiry) lets it be decided again, in arrival order
// among the key's waiters. When wait ends first, it is answered that
// refusal; when ctx ends first, partition_unavailable. A wait still
// parked when the partition's ownership ends is answered
// partition_unavailable at once (retry at the new owner with what is
// left of the wait).
func (w *Writer) DoWait(ctx context.Context, cmd decide.Command, wait time.Duration) (Result, error) {
	if wait <= 0 || w.waitsStopped.Load() {
		return w.Do(ctx, cmd)
	}
	r := cmd.Head()
	id, p := w.partition(r.Key)
	if p == nil {
		return Result{}, errUnavailable(id, "not owned by this writer")
	}
	if ctx.Err() != nil {
		return Result{}, errUnavailable(id, "not answering in time")
	}
	c := &call{cmd: cmd, done: make(chan answer, 1), ctx: ctx, wait: &waiter{until: time.Now().Add(wait)}}
	if err := p.submit(c); err != nil {
		return Result{}, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	expired := t.C
	for {
		select {
		case a := <-c.done:
			return a.res, a.err
		case <-expired:
			if refusal, ok := p.abandon(c); ok {
				return Result{}, refusal
			}
			// Being decided: the partition answers it (past its wait,
			// a refusal is answered, not parked again).
			expired = nil
		case <-ctx.Done():
			if _, ok := p.abandon(c); ok || c.withdraw() {
				return Result{}, errUnavailable(id, "not answering in time")
			}
			return Result{}, errOutcomeUnknown(id, r, "did not answer in time")
		}
	}
}

// StopWaits answers every parked wait partition_unavailable now, and
// has later waits decided once, without waiting: a writer told to stop
// calls it before its HTTP server drains the requests in flight, which
// would otherwise hold the drain for as long as their waits.
func (w *Writer) StopWaits() {
	w.waitsStopped.Store(true)
	w.mu.RLock()
	defer w.mu.RUnlock()
	for _, p := range w.parts {
		p.endWaits()
	}
}

// Waiting returns how many calls wait on key at its partition's owner
// (parked or being decided again): for tests and the status of a key.
func (w *Writer) Waiting(key contract.Key) int {
	_, p := w.partition(key)
	if p == nil {
		return 0
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if q := p.waits[key.String()]; q != nil {
		return len(q.calls)
	}
	return 0
}

// abandon takes c out of its key's queue when it is parked there, and
// returns the refusal it parked on; false when it is being decided or
// was answered.
func (p *partition) abandon(c *call) (error, bool) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if c.wait.state != waitParked {
		// Being decided, or answered (its answer is sent or on its
		// way): the caller reads it.
		return nil, false
	}
	p.dropWaiter(c)
	return c.wait.refusal, true
}

// dropWaiter removes c from its key's queue (wmu held).
func (p *partition) dropWaiter(c *call) {
	c.wait.state = waitGone
	k := c.head().Key.String()
	q := p.waits[k]
	if q == nil {
		return
	}
	if i := slices.Index(q.calls, c); i >= 0 {
		q.calls = slices.Delete(q.calls, i, i+1)
		p.w.metrics.waiters.Dec()
	}
	if len(q.calls) == 0 {
		if q.timer != nil {
			q.timer.Stop()
		}
		delete(p.waits, k)
	}
}

// markQueued sets, before a batch is decided, whether each of its lock
// acquires has waiters ahead of it (decide.Lock.Queued): a call not in
// its key's queue is behind every waiter there; one in it, behind those
// before it.
func (p *partition) markQueued(batch []*call) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for _, c := range batch {
		l, ok := c.cmd.(*decide.Lock)
		if !ok || l.Op.LockAction() != contract.LockAcquire {
			continue
		}
		l.Queued = false
		if q := p.waits[l.Key.String()]; q != nil && len(q.calls) > 0 {
			l.Queued = q.calls[0] != c
		}
	}
}

// settle answers the calls of a decided batch that wait: a waitable
// refusal before its wait ended parks the call (at its place when it was
// queued already, else at the tail); anything else leaves the queue and
// is answered. It returns the calls it did not park, to answer.
func (p *partition) settle(batch []*call, ds []decide.Decision) {
	now := time.Now()
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for i, c := range batch {
		if c.wait == nil || ds[i].Err == errDeferred {
			continue
		}
		if err := ds[i].Err; waitable(c.cmd, err) && now.Before(c.wait.until) && !p.w.waitsStopped.Load() {
			c.wait.refusal = err
			if c.wait.state != waitParked {
				p.park(c)
			}
			p.armExpiry(c, err)
			ds[i].Err = errParked
			continue
		}
		p.dropWaiter(c)
	}
}

// errParked marks, in a batch's decisions, a waiting call parked: it is
// not answered.
var errParked = errors.New("parked until its key changes")

// park puts c in its key's queue: at its place when it is there (woken
// and refused again), else at the tail (wmu held).
func (p *partition) park(c *call) {
	k := c.head().Key.String()
	q := p.waits[k]
	if q == nil {
		q = &keyWaiters{}
		p.waits[k] = q
	}
	if !slices.Contains(q.calls, c) {
		q.calls = append(q.calls, c)
		p.w.metrics.waiters.Inc()
	}
	c.wait.state = waitParked
}

// armExpiry sets the timer of a lock's queue to its holder's expiry,
// when the refusal names one: its head is woken then (wmu held).
func (p *partition) armExpiry(c *call, refusal error) {
	e, ok := errors.AsType[*contract.Error](refusal)
	if !ok || e.Current == nil || e.Current.ExpiresAt == nil || !isLockWait(c.cmd) {
		return
	}
	k := c.head().Key.String()
	q := p.waits[k]
	at := e.Current.ExpiresAt.Add(time.Millisecond)
	if q.timer != nil && q.at.Equal(at) {
		return
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	q.at = at
	q.timer = time.AfterFunc(time.Until(at), func() { p.expired(k) })
}

// expired marks the lock k's lease ended: the partition wakes its head.
func (p *partition) expired(k string) {
	p.wmu.Lock()
	p.due[k] = 1
	p.wmu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// woken returns the parked calls to decide again, in arrival order:
// of each key a committed event named (as many as its events: each item
// pushed serves one pop, each pop's event wakes the next), of each lock
// whose lease ran out, the head. A lock's queue hands only its head
// back, whose grant (an event) then wakes the next.
func (p *partition) woken(evs []*contract.Event) []*call {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if len(p.waits) == 0 {
		clear(p.due)
		return nil
	}
	for _, e := range evs {
		if _, ok := p.waits[e.Key]; ok {
			p.due[e.Key]++
		}
	}
	var out []*call
	for k, n := range p.due {
		q := p.waits[k]
		if q == nil {
			continue
		}
		for _, c := range q.calls {
			if n == 0 {
				break
			}
			if isLockWait(c.cmd) {
				if c.wait.state == waitParked {
					c.wait.state = waitDeciding
					out = append(out, c)
				}
				break // only the head
			}
			if c.wait.state == waitParked {
				c.wait.state = waitDeciding
				out = append(out, c)
				n--
			}
		}
	}
	clear(p.due)
	// Arrival order across keys does not matter; within a key the
	// queue's order is kept (each key's calls were taken in order).
	return out
}

// endWaits answers every parked call partition_unavailable when the
// ownership ends (or the writer stops: StopWaits): their clients retry
// at the new owner with what is left of their wait. Calls being decided
// are answered by the batch (settle, or the batch loop's end).
func (p *partition) endWaits() {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for k, q := range p.waits {
		if q.timer != nil {
			q.timer.Stop()
		}
		for _, c := range q.calls {
			if c.wait.state == waitParked {
				c.done <- answer{err: errUnavailable(p.id, "moving between writers")}
			}
			c.wait.state = waitGone
			p.w.metrics.waiters.Dec()
		}
		delete(p.waits, k)
	}
	clear(p.due)
}

// unwait takes the waiting calls of a batch that is answered whole (its
// round failed, its read failed) out of their keys' queues.
func (p *partition) unwait(batch []*call) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	for _, c := range batch {
		if c.wait != nil {
			p.dropWaiter(c)
		}
	}
}
