package writer

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/projection/keystate"
)

// Reads: the state a key has as this owner knows it (the overlay, the
// state cache), and the confirmation that makes a read linearizable.

// lookup returns the state of key the overlay or else the state cache
// holds, whether one does, and whether the partition is ready (caught up)
// at all.
func (p *partition) lookup(key string) (state keystate.State, ok, ready bool) {
	state, ok, ready, _ = p.lookupAt(key)
	return state, ok, ready
}

// looked is what lookupAt saw besides the state: the partition's change
// count and end.
type looked struct {
	changes uint64
	end     int64
}

// lookupAt is lookup, also returning the partition's change count and
// end, read under the same lock as the state.
func (p *partition) lookupAt(key string) (state keystate.State, ok, ready bool, l looked) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	l = looked{changes: p.changes, end: p.end}
	if !p.ready {
		return keystate.State{}, false, false, l
	}
	if e, ok := p.overlay[key]; ok {
		return e.state, true, true, l
	}
	state, ok = p.cache.Get(key)
	return state, ok, true, l
}

// cacheGet caches the state of key a GET read from the projection when
// the partition's change count is still changes, the one lookupAt
// returned before the read: no event was added to the overlay meanwhile
// and the ownership is the same, so the overlay held no event of the key
// before the read (the projection held them all) and none after it. An
// event committed to Kafka but not yet added to the overlay when the read
// began is added before its write is answered: it then shadows what was
// cached, and trim replaces it.
func (p *partition) cacheGet(key string, state keystate.State, changes uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ready && p.changes == changes {
		p.cache.Put(key, state)
	}
}

// confirm makes a read linearizable: it checks that no other writer
// appended to the partition after the events this owner knows of, by
// comparing the last stable offset with end. A writer that was paused past
// its ownership (a zombie) finds the new owner's commits there, stops
// answering for the partition and gives it up — only for a committed
// record past end, though: a round of its own in flight or being resumed
// is waited for, and a range of aborted records only (a dropped writer's
// produce, aborted once its fence was refused) moves end past it.
// Concurrent reads of all
// the writer's partitions share one last-stable-offset request (Writer.lso,
// a coalescer), always one sent after they arrived.
//
// While the committer runs rounds, a read is confirmed instead by the
// next round's second fence (committer.AwaitFence), which costs no broker
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
	offs, err := p.w.lso.Do(ctx)
	if err != nil {
		return errUnavailable(p.id, "unable to confirm ownership")
	}
	lso := offs[p.id]
	for {
		p.mu.RLock()
		end, ready, resuming, committing := p.end, p.ready, p.resuming, p.committing
		p.mu.RUnlock()
		if !ready {
			return errUnavailable(p.id, "catching up or moving between writers")
		}
		if lso <= end {
			return nil
		}
		// Something is past end. Not yet another writer's:
		var wait chan struct{}
		switch {
		case resuming != nil:
			// A failed round of ours may have left records there:
			// resume moves end past them.
			wait = resuming
		case committing != nil:
			// A round of ours in flight: its records are visible at
			// the brokers before its commit returns here.
			wait = committing
		}
		if wait != nil {
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return errUnavailable(p.id, "unable to confirm ownership")
			}
		}
		// Nor when nothing past end was committed: a writer the group
		// dropped can still produce into its shared transaction before
		// its refused fence gets it aborted, and the abort moves the
		// last stable offset with nothing written.
		if err := p.scanPastEnd(ctx, end, lso); err != nil {
			return err
		}
	}
}

// scanPastEnd reads [end, lso) for a committed record, one such read per
// partition at a time: a read that waited finds end moved (or the
// partition given up) by the one before and looks again. Only aborted
// records there: end moves to lso. A committed one: another writer
// appended, and the partition is given up.
func (p *partition) scanPastEnd(ctx context.Context, end, lso int64) error {
	select {
	case p.scanning <- struct{}{}:
	case <-ctx.Done():
		return errUnavailable(p.id, "unable to confirm ownership")
	}
	defer func() { <-p.scanning }()
	p.mu.RLock()
	moved := p.end != end || !p.ready
	p.mu.RUnlock()
	if moved {
		return nil
	}
	aborted, err := p.nothingCommitted(ctx, end, lso)
	if err != nil {
		return errUnavailable(p.id, "unable to confirm ownership")
	}
	if !aborted {
		p.log.Warn("another writer appended to the partition; giving it up", "lastStableOffset", lso, "knownEnd", end)
		p.setReady(false, 0, nil)
		select {
		case p.superseded <- struct{}{}:
		default:
		}
		return errUnavailable(p.id, "moving between writers")
	}
	p.mu.Lock()
	if p.ready && p.end == end {
		p.end = lso
	}
	p.mu.Unlock()
	return nil
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
	fenced := p.w.committer.AwaitFence()
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

// scanFetchBytes bounds each fetch of nothingCommitted: it stops at the
// first committed record, so a fetch of ReadCommitted's 16 MiB would
// decode (and decompress) records it never looks at — hundreds of
// megabytes when another producer's records fill the range.
const scanFetchBytes = 64 << 10

// errCommitted stops nothingCommitted's read at the first committed record.
var errCommitted = errors.New("a committed record")

// nothingCommitted reports whether the partition holds no committed
// record in [from, to): only aborted records and transaction markers.
func (p *partition) nothingCommitted(ctx context.Context, from, to int64) (bool, error) {
	err := changelog.ReadCommittedBounded(ctx, p.w.admCl, changelog.Range{Topic: p.w.cfg.Topics.Changes, Partition: p.id, From: from, End: to},
		scanFetchBytes, func(*kgo.Record) error { return errCommitted })
	if errors.Is(err, errCommitted) {
		return false, nil
	}
	return err == nil, err
}
