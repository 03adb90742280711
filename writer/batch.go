package writer

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/writer/batchbytes"
	"github.com/eskv/eskv/writer/committer"
)

// errDeferred marks, in a batch's decisions, a write its byte budget
// left for the next batch (package batchbytes): it is not answered.
var errDeferred = errors.New("deferred to the next batch")

// The batch loop: serve gathers the partition's calls into batches, and
// process plans every command of a batch, reads what they need once,
// decides each (package decide) and commits what they append.

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
		p.endWaits()
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
				p.w.committer.Pass(p.id)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-p.superseded:
				return errSuperseded
			case c := <-p.calls:
				batch = append(batch, c)
			case <-p.wake:
				// A lock's lease ran out: its head waiter is decided
				// again (waits.go).
				if batch = append(batch, p.woken(nil)...); len(batch) == 0 {
					continue
				}
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

	p.markQueued(batch)
	rd, err := p.read(tctx, batch)
	if err != nil {
		p.log.Error("read projection", "err", err)
		p.unwait(batch)
		for _, c := range batch {
			c.done <- answer{err: errUnavailable(p.id, "unable to read the projection")}
		}
		return nil, nil
	}
	ds, recs, evs, deferred := p.decideAll(tctx, batch, rd, epoch)
	if len(deferred) > 0 {
		p.w.metrics.deferred.Add(float64(len(deferred)))
	}
	if !p.isReady() {
		// A read's confirmation gave the partition up (confirm) while
		// this batch was read or decided: its overlay and state cache
		// went with it, so what the batch read after that came from
		// the projection alone, which lags the log. Nothing of it may
		// be answered or appended: a create decided on it would append
		// a version the key already has. (Only this goroutine makes the
		// partition ready again, in own: ready now means ready
		// throughout.)
		p.unwait(batch)
		for _, c := range batch {
			c.done <- answer{err: errUnavailable(p.id, "moving between writers")}
		}
		if p.owes {
			p.owes = false
			p.w.committer.Pass(p.id)
		}
		return nil, errSuperseded
	}
	if len(recs) == 0 && p.owes {
		p.owes = false
		p.w.committer.Pass(p.id)
	}
	if len(recs) > 0 {
		p.owes = false
		defer p.inFlight()()
		submitted := time.Now()
		r := p.w.committer.Commit(p.toCommit(recs))
		p.w.metrics.commitSeconds.Observe(time.Since(submitted).Seconds())
		p.owes = r.Err == nil
		if r.Err != nil {
			p.failedIn = r.Session
			p.unwait(batch)
			for i, c := range batch {
				switch {
				case ds[i].Err == errDeferred:
				case c.wait != nil && waitable(c.cmd, ds[i].Err):
					// Not parked: the round failed; retry with what is
					// left of the wait.
					c.done <- answer{err: errUnavailable(p.id, "could not commit a round")}
				case len(ds[i].Appends()) > 0 || ds[i].Conflict != nil:
					c.done <- answer{err: errOutcomeUnknown(p.id, c.head(), "could not commit it")}
				case revealsState(ds[i]):
					// Decided on a state the failed round's fence did
					// not confirm (it may have been refused).
					c.done <- answer{err: errUnavailable(p.id, "unable to confirm ownership")}
				default:
					c.done <- answer{res: ds[i].Result, err: ds[i].Err}
				}
			}
			return deferred, p.afterFailedRound(ctx, epoch, r)
		}
	}

	p.committed(recs, evs)
	p.settle(batch, ds)
	var lost error
	if len(recs) == 0 && anyRevealsState(ds) {
		// Nothing to commit, so no fence confirms what the answers
		// read: confirm them as a GET is (within a round's time: the
		// partition's other calls wait meanwhile).
		cctx, cancel := context.WithTimeout(ctx, cfg.TransactionTimeout)
		err := p.confirm(cctx)
		cancel()
		if err != nil {
			for i := range ds {
				if revealsState(ds[i]) {
					ds[i] = decide.Decision{Err: err}
				}
			}
			if !p.isReady() {
				lost = errSuperseded // confirm gave the partition up
			}
		}
	}

	p.w.metrics.batchSize.Observe(float64(len(batch) - len(deferred)))
	p.w.metrics.txnSeconds.Observe(time.Since(start).Seconds())
	for i, c := range batch {
		d := ds[i]
		if d.Err == errDeferred || d.Err == errParked {
			continue
		}
		p.w.logDecision(c.cmd, d)
		c.done <- answer{res: d.Result, err: d.Err}
	}
	if lost != nil {
		return deferred, lost
	}
	// The waiters the commit woke open the next batch, behind the
	// deferred calls and ahead of every call queued meanwhile.
	return append(deferred, p.woken(evs)...), nil
}

// revealsState reports whether answering d tells its caller something of
// the partition's state: a result, or a refusal decided on the state
// (not_found, a conflict, lock_held, queue_empty…). Such an answer is a
// read: it is sent only once confirmed, by the round's fence when the
// batch commits records, else by confirm. A refusal of the request alone
// (invalid, value_too_large) is not, nor partition_unavailable, nor a
// call left for the next batch or parked.
func revealsState(d decide.Decision) bool {
	if d.Err == errDeferred || d.Err == errParked {
		return false
	}
	switch contract.ErrorCode(d.Err) {
	case contract.EInvalid, contract.ETooLarge, contract.EUnavailable:
		return false
	}
	return true
}

func anyRevealsState(ds []decide.Decision) bool {
	for _, d := range ds {
		if revealsState(d) {
			return true
		}
	}
	return false
}

// toCommit is recs as the committer takes them: the writer group's offset
// of the partition before them is the end this owner knows.
func (p *partition) toCommit(recs []*kgo.Record) committer.Batch {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return committer.Batch{Partition: p.id, Records: recs, Offset: p.end, TopicID: p.topicID}
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
	states map[string]keystate.State
	known  decide.Memory
	elems  elemsKnown
	// under counts the overlay's keys under each prefix the batch's
	// prefix writes read, and bounds holds each such prefix's bound
	// (prefixes.go).
	under  map[decide.PrefixRef]int
	bounds map[decide.PrefixRef]string
}

// read plans every command of batch and reads what they need, once:
// from the overlay when it holds a key, else from the state cache, else
// from the projection (then cached: statecache.go says why that read is
// the key's state), in one round trip; then, in one more, the rows their
// keys' states name (rowsOfStates). The overlay is read first: an entry
// trimmed meanwhile is one the projection already holds.
func (p *partition) read(ctx context.Context, batch []*call) (*batchReads, error) {
	rd := &batchReads{states: make(map[string]keystate.State, len(batch)), known: make(decide.Memory), elems: newElemsKnown(),
		under: map[decide.PrefixRef]int{}, bounds: map[decide.PrefixRef]string{}}
	var q projection.Query
	now := time.Now()
	p.mu.RLock()
	p.plan(&q, batch, rd, now)
	p.mu.RUnlock()
	if err := p.readUnder(ctx, &q, rd, now); err != nil {
		return nil, err
	}
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
	if err := p.attachedOfSessions(ctx, rd.states); err != nil {
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
		plan = decide.Plan{Keys: plan.Keys[:0], Requests: plan.Requests[:0], Elements: plan.Elements[:0], Prefixes: plan.Prefixes[:0]}
		cmd.Plan(&plan)
		for _, ref := range plan.Prefixes {
			p.overlayUnder(ref, rd)
		}
		for _, k := range plan.Keys {
			if e, in := p.overlay[k]; in {
				rd.states[k] = e.state
			} else if _, seen := rd.states[k]; !seen {
				rd.states[k], in = p.cache.Get(k)
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
		if r, ok := cmd.(*decide.Queue); ok {
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
func (p *partition) cacheRead(keys []string, states map[string]keystate.State) {
	if len(keys) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ready {
		return
	}
	for _, k := range keys {
		p.cache.Put(k, states[k])
	}
}

// decideAll decides batch in order on rd (each decision sees the events
// and requestIds decided before it) and returns the decisions, the
// records to append, and the event of each kv.changes record, in order.
// A transaction's records are appended together, contiguous. A write
// whose records exceed the batch's byte budget (package batchbytes) is refused
// 413 when they could never fit, and left for the next batch (decision
// errDeferred, listed in deferred, in order) when they do not fit beside
// the writes admitted before it; either way its effects never reach rd,
// so the writes after it are decided without it. A call whose caller went
// (call.take) is not decided: answered partition_unavailable, it appends
// nothing.
func (p *partition) decideAll(ctx context.Context, batch []*call, rd *batchReads, epoch int64) (ds []decide.Decision, recs []*kgo.Record, evs []*contract.Event, deferred []*call) {
	// Postgres keeps microseconds: truncating here makes the overlay and
	// the projection answer the same timestamps.
	env := p.w.cfg.env(time.Now().UTC().Truncate(time.Microsecond), epoch)
	env.MaxAppendBytes = p.w.limits.Budget(p.w.cfg.Topics.Changes)
	// Sized for a write per call: every write of a round appends its
	// record and event here without growing them (a transaction's or a
	// conflict's may).
	ds = make([]decide.Decision, len(batch))
	recs = make([]*kgo.Record, 0, len(batch))
	evs = make([]*contract.Event, 0, len(batch))
	budget := batchbytes.NewBatch(p.w.limits)
	for i, c := range batch {
		if !c.take() {
			// Its caller went while it was queued (call.claim):
			// deciding it now would write what nobody waits for, after
			// its answer.
			ds[i] = decide.Decision{Err: errUnavailable(p.id, "not answering in time")}
			continue
		}
		if !budget.MayFit(batchbytes.Estimate(c.cmd, rd.states)) {
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
		switch f, topic, size := budget.Admit(recs[n:]); f {
		case batchbytes.TooLarge:
			recs = recs[:n]
			ds[i] = decide.Decision{Err: p.w.limits.ErrTooLarge(c.cmd, topic, size)}
			continue
		case batchbytes.Full:
			recs = recs[:n]
			ds[i] = decide.Decision{Err: errDeferred}
			deferred = append(deferred, c)
			continue
		}
		for _, ev := range appended {
			rd.states[ev.Key] = keystate.FromEvent(ev)
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
	in := decide.Input{State: rd.states[c.head().Key.String()], States: rd.states, Known: rd.known}
	if r, ok := cmd.(prefixed); ok {
		in.Under = rd.underKeys(r.Ref())
	}
	if ref, named := cmd.Row(in.State, env.Now); named {
		row, err := p.row(ctx, ref, rd.elems)
		if err != nil {
			p.log.Error("read element", "err", err)
			return decide.Decision{Err: errUnavailable(p.id, "unable to read the projection")}, false
		}
		in.Element = row
	}
	if r, isQueue := cmd.(*decide.Queue); isQueue {
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
func (p *partition) appendRecords(recs []*kgo.Record, evs []*contract.Event, conflict *decide.Conflict) ([]*kgo.Record, error) {
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
