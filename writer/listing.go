package writer

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
)

// DefaultMaxListWait is Config.MaxListWait's default.
const DefaultMaxListWait = 5 * time.Second

// AwaitProjected makes a listing of prefix linearizable: it returns once
// the projection holds every write under prefix acknowledged before it was
// called, so that one Postgres query then answers the listing with every
// such write and its filters, pages, cursors, byte budget and expiry
// hiding exactly as the projection has them (and, once the projector
// applies each Kafka transaction's events in one Postgres transaction,
// issue P3 section 2, the query never sees half of one).
//
// A prefix lies inside one scope (contract.ValidatePrefix), so one partition
// and its owner answer. Only the owner of a caught-up partition answers,
// after confirming that no other writer appended to it (a zombie owner
// would miss the new owner's writes), like State. Every write it
// acknowledged, or that an earlier owner acknowledged and catch-up read,
// is either in its overlay or already projected: an overlay entry is
// trimmed only once the projector's stored offset passed it. So the
// listing waits until the projector's stored offset of the partition
// passes the highest offset among the overlay's entries under prefix, and
// not at all when there is none. The wait is bounded by MaxListWait:
// beyond it the answer is partition_unavailable (the projector is down
// or far behind) with Retry-After.
//
// It returns where the listing reads: the topic and partition whose
// projector position (projector_offsets) the listing's snapshot answers
// as its position (projection.Store.Snapshot).
func (w *Writer) AwaitProjected(ctx context.Context, prefix string) (Projected, error) {
	at := Projected{Topic: w.cfg.Topics.Changes, Partition: w.PartitionOf(prefix)}
	return at, w.awaitProjected(ctx, prefix)
}

// Projected is where a read of the projection after AwaitProjected reads:
// the changes topic and the partition of its prefix.
type Projected struct {
	Topic     string
	Partition int32
}

// awaitProjected is AwaitProjected without its answer.
func (w *Writer) awaitProjected(ctx context.Context, prefix string) error {
	p, err := w.confirmed(ctx, prefix)
	if err != nil {
		return err
	}
	target, ready := p.unprojected(prefix)
	if !ready {
		return errUnavailable(p.id, "catching up or moving between writers")
	}
	return w.awaitTarget(ctx, p, target)
}

// AwaitPosition makes a read of the past under prefix at a position of
// its partition (every event up to at.Offset; projection.At) exact: a
// position of another partition is refused (invalid, field at); else it
// returns
// once the projection holds every event under prefix at or before
// offset, as AwaitProjected does for every acknowledged one. An offset
// at or past the end of the partition's log (as its confirmed owner
// knows it, commit markers included) names events not written yet: it
// is refused (invalid, field at) rather than waited for, as etcd
// refuses a future revision.
//
// The overlay holds each key's newest unprojected event; one past offset
// may hide older ones at or before it, so such a key asks the projector
// to pass offset itself, which it does since an event follows offset.
func (w *Writer) AwaitPosition(ctx context.Context, prefix string, at contract.Cursor) error {
	if id := w.PartitionOf(prefix); at.Partition != id {
		return contract.FieldErrorf(contract.EInvalid, "at", "position %s is of partition %d; %s is in partition %d", at, at.Partition, prefix, id)
	}
	p, err := w.confirmed(ctx, prefix)
	if err != nil {
		return err
	}
	offset := at.Offset
	target, end, ready := p.unprojectedUpTo(prefix, offset)
	if !ready {
		return errUnavailable(p.id, "catching up or moving between writers")
	}
	if offset >= end {
		return contract.FieldErrorf(contract.EInvalid, "at", "position %s is past the end of the log of partition %d (its next offset is %d)",
			contract.Cursor{Partition: p.id, Offset: offset}, p.id, end)
	}
	return w.awaitTarget(ctx, p, target)
}

// PartitionOf is the partition of kv.changes that holds the keys under
// prefix (a key, or a prefix that names its scope).
func (w *Writer) PartitionOf(prefix string) int32 {
	return changelog.Partition(contract.ScopeOf(prefix), w.cfg.Topics.Partitions)
}

// confirmed is the partition of prefix's scope once its ownership by
// this writer is confirmed (no other writer appended to it).
func (w *Writer) confirmed(ctx context.Context, prefix string) (*partition, error) {
	id := w.PartitionOf(prefix)
	w.mu.RLock()
	p := w.parts[id]
	w.mu.RUnlock()
	if p == nil {
		return nil, errUnavailable(id, "not owned by this writer")
	}
	if err := p.confirm(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// awaitTarget waits, at most MaxListWait, until the projector's stored
// offset of p is past target (not at all when target < 0).
func (w *Writer) awaitTarget(ctx context.Context, p *partition, target int64) error {
	if target < 0 {
		w.metrics.listWait.Observe(0)
		return nil
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, w.cfg.MaxListWait)
	defer cancel()
	err := p.awaitOffset(wctx, target)
	w.metrics.listWait.Observe(time.Since(start).Seconds())
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			w.metrics.listWaitTimeouts.Inc()
			p.log.Warn("a listing waited for the projector in vain", "waited", w.cfg.MaxListWait, "offset", target, "err", err)
		}
		return errUnavailable(p.id, "waiting for the projector to apply recent writes")
	}
	return nil
}

// unprojected returns the highest offset among the overlay's entries whose
// key starts with prefix (-1 when none: the projection holds every write
// under prefix this owner knows of), and whether the partition is ready.
// It scans the whole overlay under the read lock: O(overlay), which the
// trim every TrimInterval (50 ms) keeps to the writes of about that long
// while the projector keeps up; a sorted index would cost every write
// instead.
func (p *partition) unprojected(prefix string) (offset int64, ready bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.ready {
		return -1, false
	}
	offset = -1
	for k, e := range p.overlay {
		if e.offset > offset && strings.HasPrefix(k, prefix) {
			offset = e.offset
		}
	}
	return offset, true
}

// awaitOffset polls the projector's stored offset of the partition until
// it is past offset, backing off from 1 ms to 10 ms between polls (the
// projector applies a batch every few milliseconds under load). Concurrent
// waiters share each poll (p.projected, a coalescer: every poll starts
// after its waiters arrived), so a burst of listings costs one query per
// round, not one each. Once the stored offset is known past an entry, the
// overlay drops it at once rather than at the next trim.
func (p *partition) awaitOffset(ctx context.Context, offset int64) error {
	var pollErr error // the last failed poll, told with the timeout
	for wait := time.Millisecond; ; wait = min(2*wait, 10*time.Millisecond) {
		offs, err := p.w.projected.Do(ctx)
		next := offs[p.id]
		if err == nil && next > offset {
			p.trim(next)
			return nil
		}
		if err != nil && ctx.Err() == nil {
			pollErr = err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), pollErr)
		case <-time.After(wait):
		}
	}
}

// unprojectedUpTo is unprojected for a read at offset: the highest
// offset, capped at offset, among the overlay's entries under prefix
// (-1 when none), the end of the partition's log and whether the
// partition is ready.
func (p *partition) unprojectedUpTo(prefix string, offset int64) (target, end int64, ready bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.ready {
		return -1, 0, false
	}
	target = -1
	for k, e := range p.overlay {
		if strings.HasPrefix(k, prefix) {
			target = max(target, min(e.offset, offset))
		}
	}
	return target, p.end, true
}
