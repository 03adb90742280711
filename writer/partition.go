package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/writer/statecache"
)

// call is one write waiting for its answer.
type call struct {
	cmd  decide.Command
	done chan answer // buffered: the partition never blocks on an answer
	// ctx is its caller's (nil: no caller waits, as for a denied
	// write's audit record). claim settles, once, whether the call is
	// decided: the partition takes it (take) unless its ctx ended, and a
	// caller whose ctx ends while it is still queued withdraws it
	// (withdraw). A withdrawn call is never decided, so nothing of it is
	// written and its caller answers partition_unavailable; only a call
	// taken may commit after its caller went (outcome_unknown), and only
	// in the round that took it.
	ctx   context.Context
	claim atomic.Uint32
	// wait is set on a call that may wait (DoWait, waits.go).
	wait *waiter
}

// A call's claim: queued until the partition takes it or its caller
// withdraws it.
const (
	claimQueued uint32 = iota
	claimTaken
	claimWithdrawn
)

// take reports whether the partition may decide c now: not when its
// caller withdrew it or its ctx ended (then it is withdrawn). A call
// taken before (left for the next batch, a waiter woken) stays taken.
func (c *call) take() bool {
	if c.ctx != nil && c.ctx.Err() != nil {
		c.claim.CompareAndSwap(claimQueued, claimWithdrawn)
		return false
	}
	return c.claim.CompareAndSwap(claimQueued, claimTaken) || c.claim.Load() == claimTaken
}

// withdraw reports whether c is withdrawn, withdrawing it unless the
// partition took it: then it will never be decided.
func (c *call) withdraw() bool {
	return c.claim.CompareAndSwap(claimQueued, claimWithdrawn) || c.claim.Load() == claimWithdrawn
}

// command is c's command.
func (c *call) command() decide.Command { return c.cmd }

// head is c's command's header.
func (c *call) head() *decide.Header { return c.cmd.Head() }

type answer struct {
	res Result
	err error
}

// overlayEntry is the state of a key after an event that the projection
// may not hold yet, with the event's offset, and the requestIds of the
// key's events the projection may not hold (requestid.go): those of its
// versions after gap, within the window.
type overlayEntry struct {
	state    keystate.State
	offset   int64
	requests recentRequests
	gap      requestGap
	// elems are the unprojected element changes of a collection key
	// (sets.go): member -> version of its kv_elements row after them.
	elems map[string]int64
	// vals are the values of the list elements among elems (lists.go):
	// position -> value, for a pop of an unprojected push.
	vals map[string]json.RawMessage
	// popped is the element the latest event popped when it is a pop
	// (lpop, rpop, qpop): a retry of that pop is answered with it (recall).
	popped *contract.Element
	// items are the unprojected changes of a queue's items (queues.go):
	// member -> the item's state after them (State "": row deleted) and
	// the offset of its latest change. trim drops the items the
	// projection holds, so a queue written without pause (whose entry
	// is never trimmed) keeps only the projector's lag here.
	items map[string]overlayItem
}

// partition is this writer's ownership of one partition of kv.changes: the
// only goroutine that appends to it, its overlay, and its request queue.
type partition struct {
	id    int32
	w     *Writer
	log   *slog.Logger
	calls chan *call

	mu      sync.RWMutex
	ready   bool
	epoch   int64
	overlay map[string]overlayEntry
	// readySince is when the ownership became ready (leaseNow): only a
	// fence sent since then confirms its reads by lease (lease.go).
	readySince int64
	// requestIDs counts the requestIds the overlay's entries remember
	// (requestid.go): bounded by MaxOverlay like its keys (submit).
	requestIDs int
	// cache holds the states of keys the overlay no longer holds
	// (statecache.go); it lives as long as the ownership.
	cache *statecache.Cache
	// changes counts the events added to the overlay and the starts and
	// ends of ownership: a GET caches what it read from the projection
	// only when it did not move during the read (cacheGet).
	changes uint64
	// end is the offset after the last record this owner knows committed
	// on the partition: the last stable offset it caught up to, then past
	// the commit marker of each of its transactions (last record + 2:
	// each partition of a shared transaction gets its own marker). Only
	// the partition's owner writes to it, so a last stable offset beyond
	// end means another writer took the partition over.
	end int64
	// superseded is signalled when a read found the partition written by
	// another writer.
	superseded chan struct{}
	// scanning is held by the read that looks for a committed record past
	// end (confirm, nothingCommitted): one such read of the log at a time,
	// however many requests ask.
	scanning chan struct{}
	// topicID names kv.changes in the second fence; set by own.
	topicID [16]byte
	// failedIn is the committer session in which this partition's last
	// failed round ran (package committer); own catches up only after it.
	failedIn uint64
	// resuming is set while the partition resumes after a failed round
	// (resume) and closed when it did: reads wait for it (confirm).
	resuming chan struct{}
	// committing is set while a round of the partition's is in flight
	// (process, from its commit until its outcome is known: end moved
	// past it, or the failed round was dealt with) and closed then: its
	// records may be visible at the brokers before end moves past them,
	// so a read that finds the last stable offset past end waits for it
	// before it concludes another writer wrote (confirm).
	committing chan struct{}
	// served: the ownership run started became ready (own). Only the
	// partition's own goroutine touches it.
	served bool
	// owes: the last round answered this partition's batch, and the
	// next round waits for its next batch or its pass (committer.Pass).
	// Only the partition's own goroutine touches it.
	owes bool

	// The blocking waits of the ownership (waits.go): each key's
	// waiting calls in arrival order, the keys whose lock expired
	// (woken by timer; due), and wake, signalled then. wmu guards them;
	// only the partition goroutine parks and wakes.
	wmu   sync.Mutex
	waits map[string]*keyWaiters
	due   map[string]int
	wake  chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

func newPartition(w *Writer, id int32) *partition {
	p := &partition{
		id:         id,
		w:          w,
		log:        w.log.With("partition", id),
		calls:      make(chan *call, w.cfg.QueueDepth),
		done:       make(chan struct{}),
		superseded: make(chan struct{}, 1),
		scanning:   make(chan struct{}, 1),
		waits:      make(map[string]*keyWaiters),
		due:        make(map[string]int),
		wake:       make(chan struct{}, 1),
		cache:      statecache.New(w.cfg.StateCacheBytes/int64(w.cfg.Topics.Partitions), w.metrics.cache),
	}
	return p
}

// errUnavailable is the answer while the partition is not ready.
func errUnavailable(p int32, why string) error {
	return &contract.Error{Code: contract.EUnavailable, Message: fmt.Sprintf("partition %d is %s; retry", p, why), RetryAfterSeconds: 1}
}

// errOutcomeUnknown answers a write of r that partition p was handed and
// may still commit, or may have committed: retried with r's requestId
// it is applied once at most (contract.EOutcomeUnknown).
func errOutcomeUnknown(p int32, r *decide.Header, why string) error {
	how := "retry with the same requestId"
	if r.RequestID == "" {
		how = "it carried no requestId, so read the key before writing it again"
	}
	return &contract.Error{Code: contract.EOutcomeUnknown, RequestID: r.RequestID, RetryAfterSeconds: 1,
		Message: fmt.Sprintf("the write's outcome is unknown: partition %d %s (it may have been applied); %s", p, why, how)}
}

// submit queues a request, or refuses it at once when the partition is not
// ready or its queue is full. Holding the read lock while sending means no
// call is queued after the partition stopped being ready and drained.
func (p *partition) submit(c *call) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.ready {
		return errUnavailable(p.id, "catching up or moving between writers")
	}
	if n := len(p.overlay); n >= p.w.cfg.MaxOverlay {
		// Backpressure: the projector is down or far behind, and the
		// overlay (every event it does not hold yet) would grow without
		// bound. Reads go on; writes resume as the projector catches up.
		p.w.metrics.overlayFull.Inc()
		return errUnavailable(p.id, fmt.Sprintf("waiting for the projector: %d changes are not projected yet", n))
	}
	if n := p.requestIDs; n >= p.w.cfg.MaxOverlay {
		// The same for the requestIds of unprojected writes, which the
		// overlay keeps for RequestIDAge however hot their key.
		p.w.metrics.overlayFull.Inc()
		return errUnavailable(p.id, fmt.Sprintf("waiting for the projector: the requestIds of %d writes are not projected yet", n))
	}
	select {
	case p.calls <- c:
		return nil
	default:
		return errUnavailable(p.id, "overloaded")
	}
}

// offer queues a call that may be dropped (a denied write's audit
// record): only when the partition is ready and its queue less than half
// full, never waiting.
func (p *partition) offer(c *call) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.ready || len(p.calls) >= cap(p.calls)/2 {
		return false
	}
	select {
	case p.calls <- c:
		return true
	default:
		return false
	}
}

// setReady starts or ends an ownership; either way the state cache starts
// empty, since another writer may have owned the partition meanwhile.
func (p *partition) setReady(ready bool, epoch int64, overlay map[string]overlayEntry) {
	p.mu.Lock()
	p.ready, p.epoch, p.overlay = ready, epoch, overlay
	p.requestIDs = 0
	for _, e := range overlay {
		p.requestIDs += len(e.requests)
	}
	if ready {
		p.readySince = leaseNow()
	}
	p.cache.Reset()
	p.changes++
	p.mu.Unlock()
}

// inFlight marks a round of the partition in flight (committing) and
// returns what ends the mark.
func (p *partition) inFlight() (landed func()) {
	return p.mark(&p.committing)
}

// mark sets *ch, a channel p.mu guards that reads wait on, to a new
// channel and returns what clears and closes it.
func (p *partition) mark(ch *chan struct{}) (unmark func()) {
	done := make(chan struct{})
	p.mu.Lock()
	*ch = done
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		*ch = nil
		p.mu.Unlock()
		close(done)
	}
}

// isReady reports whether the partition is owned and caught up.
func (p *partition) isReady() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.ready
}

func (p *partition) failQueued() {
	for {
		select {
		case c := <-p.calls:
			c.done <- answer{err: errUnavailable(p.id, "moving between writers")}
		default:
			return
		}
	}
}

// advance adds e, appended at offset, to the overlay (write lock held).
func (p *partition) advance(e *contract.Event, offset int64) {
	old := p.overlay[e.Key]
	n := old.next(e, offset, p.w.cfg.requestWindow())
	p.overlay[e.Key] = n
	p.requestIDs += len(n.requests) - len(old.requests)
}

// trim drops overlay entries the projection holds (offset below next),
// moving their states to the state cache, and the queue items the
// projection holds from the entries it keeps.
func (p *partition) trim(next int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, e := range p.overlay {
		if e.offset < next {
			delete(p.overlay, k)
			p.requestIDs -= len(e.requests)
			p.cache.Put(k, e.state)
			continue
		}
		changed := false
		if len(e.requests) > 0 && e.requests[0].offset < next {
			var n int
			e, n = e.forget(next)
			p.requestIDs -= n
			changed = true
		}
		if len(e.items) > 0 {
			if items, pruned := pruneItems(e.items, next); pruned {
				e.items = items
				changed = true
			}
		}
		if changed {
			p.overlay[k] = e
		}
	}
	p.w.metrics.overlaySize.WithLabelValues(fmt.Sprint(p.id)).Set(float64(len(p.overlay)))
}
