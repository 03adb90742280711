package writer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
)

// call is one request waiting for its answer.
type call struct {
	req  *Request
	done chan answer // buffered: the partition never blocks on an answer
	// cmd is req's command (decide.CommandOf), set by the partition's
	// goroutine when it first plans the call.
	cmd decide.Command
}

// command is c's command.
func (c *call) command() decide.Command {
	if c.cmd == nil {
		c.cmd = decide.CommandOf(c.req)
	}
	return c.cmd
}

type answer struct {
	res Result
	err error
}

// overlayEntry is the state of a key after an event that the projection
// may not hold yet, with the event's offset, and the requestIds of the
// key's events the projection may not hold (requestid.go): those of its
// versions after gap, within the window.
type overlayEntry struct {
	state    contract.State
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
	cache *stateCache
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
	// topicID names kv.changes in the second fence; set by own.
	topicID [16]byte
	// failedIn is the committer session in which this partition's last
	// failed round ran (committer.go); own catches up only after it.
	failedIn uint64
	// resuming is set while the partition resumes after a failed round
	// (resume) and closed when it did: reads wait for it (confirm).
	resuming chan struct{}
	// served: the ownership run started became ready (own). Only the
	// partition's own goroutine touches it.
	served bool
	// owes: the last round answered this partition's batch, and the
	// next round waits for its next batch or its pass (committer.collect).
	// Only the partition's own goroutine touches it.
	owes bool

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
		cache:      newStateCache(w.cfg.StateCacheBytes/int64(w.cfg.Topics.Partitions), w.metrics),
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
func errOutcomeUnknown(p int32, r *Request, why string) error {
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
	p.cache.reset()
	p.changes++
	p.mu.Unlock()
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
			p.cache.put(k, e.state)
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

// run owns the partition until ctx ends, re-fencing and catching up again
// after any failure: a failed transaction may or may not have committed,
// so the only safe state to continue from is the log itself.
func (p *partition) run(ctx context.Context) {
	defer close(p.done)
	backoff := 100 * time.Millisecond
	for {
		err := p.own(ctx)
		if p.served {
			// The backoff spaces failures to become ready, not the
			// restarts of ownerships that served for a while.
			p.served = false
			backoff = 100 * time.Millisecond
		}
		if errors.Is(err, errSuperseded) {
			// Another writer owns the partition: this one was paused or
			// cut off past its session. Re-fencing now would only fence
			// the real owner; the group revokes the partition meanwhile.
			backoff = max(backoff, p.w.cfg.SessionTimeout)
		}
		p.setReady(false, 0, nil)
		p.failQueued()
		if ctx.Err() != nil {
			return
		}
		var fenced *groupFencedError
		if errors.As(err, &fenced) {
			// The group coordinator refused this writer's membership:
			// wait until the group client learns where it stands
			// (still the owner under a new generation, or revoked).
			p.awaitGroupChange(ctx, fenced, p.w.cfg.SessionTimeout)
			if ctx.Err() != nil {
				return
			}
		}
		p.log.Warn("partition ownership interrupted; fencing and catching up again", "err", err, "backoff", backoff)
		p.w.metrics.ownershipRestarts.Inc()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// own fences older owners, catches up, and serves requests until an error
// or the end of ctx.
func (p *partition) own(ctx context.Context) error {
	cfg := p.w.cfg
	start := leaseNow()
	// The ownership epoch (fence.go): above every earlier owner's.
	epoch, err := p.fence(ctx)
	if err != nil {
		return err
	}
	// A round of ours that failed may have left records of the
	// committer's previous producer in flight: read the log end only
	// once its next producer fenced them.
	if err := p.w.committer.await(ctx, p.failedIn); err != nil {
		return fmt.Errorf("await the shared producer: %w", err)
	}
	overlay, end, err := p.catchUp(ctx)
	if err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	if err := p.awaitLeases(ctx, start); err != nil {
		return err
	}
	p.setReady(true, int64(epoch), overlay)
	p.served = true
	p.mu.Lock()
	p.end = end
	p.mu.Unlock()
	select { // a stale signal from an earlier ownership
	case <-p.superseded:
	default:
	}
	p.w.metrics.partitionsReady.Inc()
	defer p.w.metrics.partitionsReady.Dec()
	p.log.Info("partition owned", "epoch", epoch, "overlay", len(overlay))
	if cfg.AdvertiseURL != "" {
		if err := p.w.proj.SetOwner(ctx, p.id, cfg.InstanceID, cfg.AdvertiseURL, int64(epoch)); err != nil {
			p.log.Warn("record partition ownership (other writers cannot forward here until it succeeds)", "err", err)
		}
	}

	return p.serve(ctx, int64(epoch))
}

// catchUp reads the partition from the projector's stored offset up to the
// last stable offset, returning the events the projection may not hold.
func (p *partition) catchUp(ctx context.Context) (map[string]overlayEntry, int64, error) {
	cfg := p.w.cfg
	stored, err := p.w.proj.Offsets(ctx, cfg.Topics.Changes)
	if err != nil {
		return nil, 0, fmt.Errorf("projector offsets: %w", err)
	}
	end, err := p.settledEnd(ctx)
	if err != nil {
		return nil, 0, err
	}
	id, err := p.w.checkTopic(ctx)
	if err != nil {
		return nil, 0, err
	}
	p.topicID = [16]byte(id.ID) // TxnOffsetCommit v6+ names the topic by its ID
	if stored[p.id] > end {
		p.log.Error("the projection is ahead of the log: the changes topic was truncated or recreated; refusing to write",
			"storedOffset", stored[p.id], "logEnd", end)
		return nil, 0, changelog.NewResetError(cfg.Topics.Changes, changelog.ReasonOffsetAfterEnd,
			fmt.Sprintf("partition %d: projection stored offset %d is past the log end %d", p.id, stored[p.id], end))
	}
	overlay := make(map[string]overlayEntry)
	err = changelog.ReadCommitted(ctx, p.w.admCl, cfg.Topics.Changes, p.id, stored[p.id], end, func(r *kgo.Record) error {
		e, err := changelog.Event(r)
		if err != nil {
			return err
		}
		overlay[e.Key] = overlay[e.Key].next(&e, r.Offset, cfg.requestWindow())
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return overlay, end, nil
}

// settledEnd waits until no transaction is open on the partition and
// returns its end. A transaction still open is an older owner's shared
// transaction (fence.go): one its writer may still commit (while the group
// has not dropped it, or before it learns so) or that its writer cannot end
// (crashed under dynamic membership, paused, cut off). Its records could
// commit later, behind our back, so the partition stays unavailable until
// it ends: committed, aborted by that writer's next producer, or aborted by
// the broker at the transaction timeout.
func (p *partition) settledEnd(ctx context.Context) (int64, error) {
	topic := p.w.cfg.Topics.Changes
	deadline := time.Now().Add(3 * p.w.cfg.TransactionTimeout)
	for {
		lso, err := changelog.LastStableOffset(ctx, p.w.admCl, topic, p.id)
		if err != nil {
			return 0, err
		}
		hw, err := p.w.adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return 0, fmt.Errorf("high watermark: %w", err)
		}
		o, ok := hw.Lookup(topic, p.id)
		if !ok || o.Err != nil {
			return 0, fmt.Errorf("high watermark of partition %d: %v", p.id, o.Err)
		}
		if lso >= o.Offset {
			return lso, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("partition %d has a transaction open by another producer (last stable offset %d < high watermark %d)", p.id, lso, o.Offset)
		}
		p.log.Warn("waiting for an open transaction on the partition to end", "lastStableOffset", lso, "highWatermark", o.Offset)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// afterFailedRound decides what a failed round (r) of this partition
// ends: the ownership, when the error says this writer may no longer own
// the partition (a refused group fence, a fenced producer: fencedRound)
// or when resume fails; otherwise nothing (resume). Without
// Config.ResumeFailedRounds it always ends the ownership.
func (p *partition) afterFailedRound(ctx context.Context, epoch int64, r roundResult) error {
	if !p.w.cfg.ResumeFailedRounds || fencedRound(r.err) {
		return r.err
	}
	if err := p.resume(ctx, epoch, r.session); err != nil {
		return fmt.Errorf("round failed (%w); resuming failed: %w", r.err, err)
	}
	return nil
}

// fencedRound reports whether a round's error says that this writer may
// no longer own its partitions: the group coordinator refused its
// membership, or its shared producer was fenced (another process took
// its transactional id) or refused. Those partitions start their
// ownership again (fence, catch up: run); after any other failure they
// resume.
func fencedRound(err error) bool {
	if _, ok := errors.AsType[*groupFencedError](err); ok {
		return true
	}
	for _, e := range []error{errCommitterStopped, kerr.ProducerFenced, kerr.InvalidProducerEpoch,
		kerr.InvalidProducerIDMapping, kerr.TransactionalIDAuthorizationFailed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// resume goes on owning the partition after a round of it failed in
// session s for another reason than fencing (a produce the brokers
// refused, a timeout): without fencing again and without reading the
// partition from the projector's offset, and without failing the
// requests queued meanwhile, which wait. The failed transaction was not
// committed by this writer, or its outcome is unknown (EndTxn sent, no
// answer): once the committer's next session began (its InitProducerID
// completed or aborted it, and fenced any produce of the failed one
// still in flight) and no transaction is open on the partition
// (settledEnd), the log from end on holds what it left: aborted records
// and markers, which a read_committed read skips, or its committed
// records. Those are this ownership's own (its epoch): they join the
// overlay as catchUp would add them. A record of any other epoch is
// another writer's: errSuperseded. Reads wait meanwhile (confirm): the
// last stable offset is past end until resume moves end.
func (p *partition) resume(ctx context.Context, epoch int64, s uint64) error {
	done := make(chan struct{})
	p.mu.Lock()
	p.resuming = done
	from := p.end
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.resuming = nil
		p.mu.Unlock()
		close(done)
	}()
	if err := p.w.committer.await(ctx, s); err != nil {
		return fmt.Errorf("await the shared producer: %w", err)
	}
	end, err := p.settledEnd(ctx)
	if err != nil {
		return err
	}
	type logged struct {
		e      contract.Event
		offset int64
	}
	var found []logged
	err = changelog.ReadCommitted(ctx, p.w.admCl, p.w.cfg.Topics.Changes, p.id, from, end, func(r *kgo.Record) error {
		e, err := changelog.Event(r)
		if err != nil {
			return err
		}
		if e.WriterEpoch != epoch {
			return fmt.Errorf("%w (an event of epoch %d at offset %d; this ownership's is %d)", errSuperseded, e.WriterEpoch, r.Offset, epoch)
		}
		found = append(found, logged{e, r.Offset})
		return nil
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.ready {
		for i := range found {
			e := &found[i].e
			p.advance(e, found[i].offset)
		}
		p.end = max(p.end, end)
		p.changes++
	}
	p.mu.Unlock()
	p.w.metrics.resumes.Inc()
	p.log.Info("partition resumed after a failed round", "committedAnyway", len(found), "end", end)
	return nil
}

// errSuperseded ends an ownership whose partition another writer wrote to.
var errSuperseded = errors.New("another writer appended to the partition: this writer no longer owns it")

// serve decides and appends the partition's requests in batches until an
// error or the end of ctx. The calls a batch's byte budget left over
// (process) open the next batch, before anything queued; when the
// ownership ends they are answered like the queued ones.
func (p *partition) serve(ctx context.Context, epoch int64) (err error) {
	cfg := p.w.cfg
	batch := make([]*call, 0, cfg.MaxBatch)
	var carry []*call
	defer func() {
		for _, c := range carry {
			c.done <- answer{err: errUnavailable(p.id, "moving between writers")}
		}
	}()
	// expect is the size of the previous batch: an estimate of how many
	// callers are waiting on this partition.
	expect := 1
	for {
		batch = append(batch[:0], carry...)
		carry = nil
		if len(batch) == 0 {
			if p.owes && len(p.calls) == 0 {
				p.owes = false
				p.w.committer.pass(p.id)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-p.superseded:
				return errSuperseded
			case c := <-p.calls:
				batch = append(batch, c)
			}
		}
		// Group commit: take whatever queued while the previous
		// transaction was in flight, and when the previous batch was
		// larger, wait up to MaxLinger for as many. A lone caller never
		// waits; under load a transaction carries every waiting caller
		// instead of a few, which is what bounds throughput (the broker
		// commits a limited number of transactions per second).
		drain(p.calls, &batch, cfg.MaxBatch)
		if len(batch) < expect && cfg.MaxLinger > 0 && !p.owes {
			// (Not when the next round waits for this batch: the
			// round is what the callers answered last wait for.)
			linger(ctx, p.calls, &batch, min(expect, cfg.MaxBatch), cfg.MaxLinger)
		}
		expect = len(batch)
		if carry, err = p.process(ctx, epoch, batch); err != nil {
			return err
		}
	}
}

// drain appends queued calls to batch without waiting, up to max.
func drain(calls <-chan *call, batch *[]*call, max int) {
	for len(*batch) < max {
		select {
		case c := <-calls:
			*batch = append(*batch, c)
		default:
			return
		}
	}
}

// linger appends calls to batch until it holds want or d passed.
func linger(ctx context.Context, calls <-chan *call, batch *[]*call, want int, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for len(*batch) < want {
		select {
		case c := <-calls:
			*batch = append(*batch, c)
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// process decides a batch against the overlay and the projection, appends
// the accepted events and the conflict records in one transaction, and
// answers every call once the transaction committed; it returns the
// calls the batch's byte budget left for the next batch, unanswered
// (decideAll). An error ends the ownership.
func (p *partition) process(ctx context.Context, epoch int64, batch []*call) ([]*call, error) {
	cfg := p.w.cfg
	start := time.Now()
	// A transaction, once started, is finished even when ownership ends
	// meanwhile: cancelling EndTransaction would leave its outcome unknown.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.TransactionTimeout)
	defer cancel()

	rd, err := p.read(tctx, batch)
	if err != nil {
		p.log.Error("read projection", "err", err)
		for _, c := range batch {
			c.done <- answer{err: errUnavailable(p.id, "unable to read the projection")}
		}
		return nil, nil
	}
	ds, recs, evs, deferred := p.decideAll(tctx, batch, rd, epoch)
	if len(deferred) > 0 {
		p.w.metrics.deferred.Add(float64(len(deferred)))
	}
	if len(recs) == 0 && p.owes {
		p.owes = false
		p.w.committer.pass(p.id)
	}
	if len(recs) > 0 {
		p.owes = false
		r := p.w.committer.commit(p, recs)
		p.owes = r.err == nil
		if r.err != nil {
			p.failedIn = r.session
			for i, c := range batch {
				switch {
				case ds[i].Err == errDeferred:
				case len(ds[i].Appends()) > 0 || ds[i].Conflict != nil:
					c.done <- answer{err: errOutcomeUnknown(p.id, c.req, "could not commit it")}
				default:
					c.done <- answer{res: ds[i].Result, err: ds[i].Err}
				}
			}
			return deferred, p.afterFailedRound(ctx, epoch, r)
		}
	}

	p.committed(recs, evs)

	p.w.metrics.batchSize.Observe(float64(len(batch) - len(deferred)))
	p.w.metrics.txnSeconds.Observe(time.Since(start).Seconds())
	for i, c := range batch {
		d := ds[i]
		if d.Err == errDeferred {
			continue
		}
		p.w.logDecision(c.req, d)
		c.done <- answer{res: d.Result, err: d.Err}
	}
	return deferred, nil
}

// committed adds the events of a committed transaction to the overlay
// and moves end past it. A partition no longer ready is left alone:
// confirm gave it up while the transaction was in flight (its overlay is
// gone), and the next ownership reads these events from the log.
func (p *partition) committed(recs []*kgo.Record, evs []*contract.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ready {
		return
	}
	p.changes++
	j := 0
	for _, r := range recs {
		if r.Topic != p.w.cfg.Topics.Changes {
			continue
		}
		e := evs[j]
		p.advance(e, r.Offset)
		p.end = max(p.end, r.Offset+2) // past the commit marker
		j++
	}
}

// batchReads is what a batch read before it decides: the current state
// of each key (every key of a transaction), what is known of the
// requestIds it carries on the keys it writes (requestid.go), and the
// element rows and queue items it decides on; its decisions add to them.
type batchReads struct {
	states map[string]contract.State
	known  decide.Memory
	elems  elemsKnown
}

// read plans every command of batch and reads what they need, once:
// from the overlay when it holds a key, else from the state cache, else
// from the projection (then cached: statecache.go says why that read is
// the key's state), in one round trip; then, in one more, the rows their
// keys' states name (rowsOfStates). The overlay is read first: an entry
// trimmed meanwhile is one the projection already holds.
func (p *partition) read(ctx context.Context, batch []*call) (*batchReads, error) {
	rd := &batchReads{states: make(map[string]contract.State, len(batch)), known: make(decide.Memory), elems: newElemsKnown()}
	var q projection.Query
	now := time.Now()
	p.mu.RLock()
	p.plan(&q, batch, rd, now)
	p.mu.RUnlock()
	for i := range q.Heads {
		q.Heads[i].Limit = rd.elems.q.pops[q.Heads[i].Queue]
	}
	if len(q.Keys) > 0 || len(q.Requests) > 0 || len(q.Elements) > 0 || len(q.Heads) > 0 || len(q.Dedups) > 0 || len(q.Items) > 0 {
		f, err := p.w.proj.Find(ctx, q)
		if err != nil {
			return nil, err
		}
		maps.Copy(rd.states, f.States)
		p.cacheRead(q.Keys, rd.states)
		for ref, a := range f.Requests {
			rd.known[decide.RequestRef(ref)] = decide.AppliedRequest(a)
		}
		rd.elems.found(f)
		rd.elems.q.found(q, f, rd.states, now)
	}
	if err := p.rowsOfStates(ctx, batch, rd.states, rd.elems); err != nil {
		return nil, err
	}
	return rd, nil
}

// plan adds to q what the commands of batch read that the overlay and
// the state cache do not hold, taking what they hold into rd (read lock
// held).
func (p *partition) plan(q *projection.Query, batch []*call, rd *batchReads, now time.Time) {
	asked := make(map[decide.RequestRef]bool)
	var plan decide.Plan
	for _, c := range batch {
		cmd := c.command()
		plan = decide.Plan{Keys: plan.Keys[:0], Requests: plan.Requests[:0], Elements: plan.Elements[:0]}
		cmd.Plan(&plan)
		for _, k := range plan.Keys {
			if e, in := p.overlay[k]; in {
				rd.states[k] = e.state
			} else if _, seen := rd.states[k]; !seen {
				rd.states[k], in = p.cache.get(k)
				if !in {
					q.Keys = append(q.Keys, k)
				}
			}
		}
		for _, ref := range plan.Requests {
			var entry *overlayEntry
			if e, in := p.overlay[ref.Key]; in {
				entry = &e
			}
			if !asked[ref] && recall(ref, entry, rd.known, p.w.cfg.requestWindow(), now) {
				asked[ref] = true
				q.Requests = append(q.Requests, projection.RequestRef(ref))
			}
		}
		if _, ok := cmd.(decide.Queue); ok {
			r := cmd.Request()
			e, in := p.overlay[r.Key.String()]
			rd.elems.q.askQueue(q, r, e, in, now)
			continue
		}
		p.askElements(q, cmd, &plan, rd.elems, now)
	}
}

// cacheRead caches the states of keys the partition goroutine read from
// the projection, unless the partition stopped being ready meanwhile
// (confirm found another writer's commit): the next ownership starts
// empty.
func (p *partition) cacheRead(keys []string, states map[string]contract.State) {
	if len(keys) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ready {
		return
	}
	for _, k := range keys {
		p.cache.put(k, states[k])
	}
}

// decideAll decides batch in order on rd (each decision sees the events
// and requestIds decided before it) and returns the decisions, the
// records to append, and the event of each kv.changes record, in order.
// A transaction's records are appended together, contiguous. A write
// whose records exceed the batch's byte budget (batchbytes.go) is refused
// 413 when they could never fit, and left for the next batch (decision
// errDeferred, listed in deferred, in order) when they do not fit beside
// the writes admitted before it; either way its effects never reach rd,
// so the writes after it are decided without it.
func (p *partition) decideAll(ctx context.Context, batch []*call, rd *batchReads, epoch int64) (ds []decide.Decision, recs []*kgo.Record, evs []*contract.Event, deferred []*call) {
	// Postgres keeps microseconds: truncating here makes the overlay and
	// the projection answer the same timestamps.
	env := p.w.cfg.env(time.Now().UTC().Truncate(time.Microsecond), epoch)
	// Sized for a write per call: every write of a round appends its
	// record and event here without growing them (a transaction's or a
	// conflict's may).
	ds = make([]decide.Decision, len(batch))
	recs = make([]*kgo.Record, 0, len(batch))
	evs = make([]*contract.Event, 0, len(batch))
	budget := newBatchBudget(p.w.limits)
	for i, c := range batch {
		if !budget.mayFit(estimate(c.req, rd.states)) {
			// It would not fit beside the writes admitted: not worth
			// deciding now.
			ds[i] = decide.Decision{Err: errDeferred}
			deferred = append(deferred, c)
			continue
		}
		d, ok := p.decideOne(ctx, c, rd, env)
		ds[i] = d
		if !ok {
			continue
		}
		// d.Appends() without its slice of one event (an allocation per
		// write): one stays on the stack.
		var one [1]*contract.Event
		appended := d.Txn
		if d.Event != nil {
			one[0] = d.Event
			appended = one[:]
		}
		n := len(recs)
		var err error
		if recs, err = p.appendRecords(recs, appended, d.Conflict); err != nil {
			ds[i] = decide.Decision{Err: contract.Errorf(contract.EInternal, "%v", err)}
			continue
		}
		switch f, topic, size := budget.admit(recs[n:]); f {
		case tooLarge:
			recs = recs[:n]
			ds[i] = decide.Decision{Err: p.w.limits.tooLarge(c.req, topic, size)}
			continue
		case full:
			recs = recs[:n]
			ds[i] = decide.Decision{Err: errDeferred}
			deferred = append(deferred, c)
			continue
		}
		for _, ev := range appended {
			rd.states[ev.Key] = ev.State()
			rd.known.Add(ev)
			if el := ev.Element; el != nil {
				rd.elems.record(ev)
			}
		}
		evs = append(evs, appended...)
	}
	return ds, recs, evs, deferred
}

// decideOne decides c's command on what the batch knows, with the row it
// names and, for a queue write, its items; ok is false when the decision
// could not be made (the projection did not answer).
func (p *partition) decideOne(ctx context.Context, c *call, rd *batchReads, env decide.Env) (d decide.Decision, ok bool) {
	cmd := c.command()
	r := cmd.Request()
	in := decide.Input{State: rd.states[r.Key.String()], States: rd.states, Known: rd.known}
	if ref, named := cmd.Row(in.State, env.Now); named {
		row, err := p.row(ctx, ref, rd.elems)
		if err != nil {
			p.log.Error("read element", "err", err)
			return decide.Decision{Err: errUnavailable(p.id, "unable to read the projection")}, false
		}
		in.Element = row
	}
	if _, isQueue := cmd.(decide.Queue); isQueue {
		q, err := p.queueInput(ctx, in.State, r, env.Now, rd.elems.q)
		if err != nil {
			p.log.Error("read queue items", "err", err)
			return decide.Decision{Err: errUnavailable(p.id, "unable to read the projection")}, false
		}
		in.Queue = q
	}
	return cmd.Decide(in, env), true
}

// appendRecords appends the kv.changes records of evs, or else the
// kv.conflicts record of conflict, to recs; on an error it returns recs
// without any of them (a conflict record that cannot be encoded is
// dropped: the refusal is answered all the same).
func (p *partition) appendRecords(recs []*kgo.Record, evs []*contract.Event, conflict *contract.Conflict) ([]*kgo.Record, error) {
	cfg := p.w.cfg
	if len(evs) == 0 {
		if conflict != nil {
			if r, err := changelog.ConflictRecord(conflict, cfg.Topics.Conflicts, p.id, cfg.Source); err == nil {
				recs = append(recs, r)
			}
		}
		return recs, nil
	}
	n := len(recs)
	for _, ev := range evs {
		r, err := changelog.Record(ev, cfg.Topics.Changes, p.id, cfg.Source)
		if err != nil {
			return recs[:n], err
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// lookup returns the state of key the overlay or else the state cache
// holds, whether one does, and whether the partition is ready (caught up)
// at all.
func (p *partition) lookup(key string) (state contract.State, ok, ready bool) {
	state, ok, ready, _ = p.lookupAt(key)
	return state, ok, ready
}

// lookupAt is lookup, also returning the partition's change count.
func (p *partition) lookupAt(key string) (state contract.State, ok, ready bool, changes uint64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.ready {
		return contract.State{}, false, false, p.changes
	}
	if e, ok := p.overlay[key]; ok {
		return e.state, true, true, p.changes
	}
	state, ok = p.cache.get(key)
	return state, ok, true, p.changes
}

// cacheGet caches the state of key a GET read from the projection when
// the partition's change count is still changes, the one lookupAt
// returned before the read: no event was added to the overlay meanwhile
// and the ownership is the same, so the overlay held no event of the key
// before the read (the projection held them all) and none after it. An
// event committed to Kafka but not yet added to the overlay when the read
// began is added before its write is answered: it then shadows what was
// cached, and trim replaces it.
func (p *partition) cacheGet(key string, state contract.State, changes uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ready && p.changes == changes {
		p.cache.put(key, state)
	}
}

// confirm makes a read linearizable: it checks that no other writer
// appended to the partition after the events this owner knows of, by
// comparing the last stable offset with end. A writer that was paused past
// its ownership (a zombie) finds the new owner's commits there, stops
// answering for the partition and gives it up. Concurrent reads of all
// the writer's partitions share one last-stable-offset request (Writer.lso,
// a coalescer), always one sent after they arrived.
//
// While the committer runs rounds, a read is confirmed instead by the
// next round's second fence (committer.awaitFence), which costs no broker
// request of its own: the fence is what lets a write of this ownership be
// acknowledged, and it proves the same for a read. A TxnOffsetCommit sent
// after the read arrived and accepted by the group coordinator shows that
// this writer was then a current member of the writer group; if this
// ownership of the partition (its epoch, ready throughout) was not ended
// before the acceptance, no other writer could own the partition between
// the ownership's start and the acceptance (fence.go, point 2: the group
// hands a partition on only after its owner revoked it or was dropped,
// and a dropped member's commits are refused), and what earlier owners
// acknowledged is in what the ownership caught up to. So every write
// acknowledged before the read arrived is in the overlay or in the
// projection, as after a last-stable-offset check. The ownership is
// checked after the acceptance: an epoch that moved (or a partition no
// longer ready) sends the read to the last-stable-offset check, as does a
// refused fence, a failed round or a committer that ran out of rounds.
//
// First of all, within ReadLease of an accepted fence sent while this
// ownership was ready, a read is confirmed at once (confirmByLease; the
// argument, which also rests on the successor's wait, is in lease.go).
// Before that, a read waits while the partition resumes after a failed
// round (resume, awaitResumed): its end moves past that round's records.
func (p *partition) confirm(ctx context.Context) error {
	if err := p.awaitResumed(ctx); err != nil {
		return err
	}
	if p.confirmByLease() {
		return nil
	}
	if ok, err := p.confirmByFence(ctx); ok || err != nil {
		return err
	}
	p.w.metrics.confirmLSO.Inc()
	offs, err := p.w.lso.do(ctx)
	if err != nil {
		return errUnavailable(p.id, "unable to confirm ownership")
	}
	lso := offs[p.id]
	// Our own commit may be visible at the broker just before its
	// transaction returned here: look again briefly before concluding.
	var end int64
	wait := time.Millisecond
	for {
		p.mu.RLock()
		var ready bool
		var resuming chan struct{}
		end, ready, resuming = p.end, p.ready, p.resuming
		p.mu.RUnlock()
		if !ready {
			return errUnavailable(p.id, "catching up or moving between writers")
		}
		if lso <= end {
			return nil
		}
		if resuming != nil {
			// A failed round of ours, not another writer, may have
			// left records past end: resume moves end past them.
			if err := p.awaitResumed(ctx); err != nil {
				return err
			}
			continue
		}
		if wait > 64*time.Millisecond {
			break
		}
		select {
		case <-ctx.Done():
			return errUnavailable(p.id, "unable to confirm ownership")
		case <-time.After(wait):
		}
		wait *= 4
	}
	p.log.Warn("another writer appended to the partition; giving it up", "lastStableOffset", lso, "knownEnd", end)
	p.setReady(false, 0, nil)
	select {
	case p.superseded <- struct{}{}:
	default:
	}
	return errUnavailable(p.id, "moving between writers")
}

// awaitResumed waits while the partition resumes after a failed round
// (resume): until then the last stable offset may be past end without
// another writer having written.
func (p *partition) awaitResumed(ctx context.Context) error {
	p.mu.RLock()
	resuming := p.resuming
	p.mu.RUnlock()
	if resuming == nil {
		return nil
	}
	select {
	case <-resuming:
		return nil
	case <-ctx.Done():
		return errUnavailable(p.id, "catching up after a failed transaction")
	}
}

// confirmByFence confirms a read by the next round's fence (see confirm):
// ok when it did, an error only when ctx ended; false without an error
// when the read must ask the brokers.
func (p *partition) confirmByFence(ctx context.Context) (ok bool, err error) {
	p.mu.RLock()
	epoch, ready := p.epoch, p.ready
	p.mu.RUnlock()
	if !ready {
		return false, nil
	}
	fenced := p.w.committer.awaitFence()
	if fenced == nil {
		return false, nil
	}
	select {
	case err := <-fenced:
		if err != nil {
			return false, nil
		}
	case <-ctx.Done():
		return false, errUnavailable(p.id, "unable to confirm ownership")
	}
	p.mu.RLock()
	ok = p.ready && p.epoch == epoch
	p.mu.RUnlock()
	if ok {
		p.w.metrics.confirmFence.Inc()
	}
	return ok, nil
}
