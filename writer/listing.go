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
	id := changelog.Partition(contract.ScopeOf(prefix), w.cfg.Topics.Partitions)
	at := Projected{Topic: w.cfg.Topics.Changes, Partition: id}
	return at, w.awaitProjected(ctx, id, prefix)
}

// Projected is where a read of the projection after AwaitProjected reads:
// the changes topic and the partition of its prefix.
type Projected struct {
	Topic     string
	Partition int32
}

// awaitProjected is AwaitProjected of partition id.
func (w *Writer) awaitProjected(ctx context.Context, id int32, prefix string) error {
	w.mu.RLock()
	p := w.parts[id]
	w.mu.RUnlock()
	if p == nil {
		return errUnavailable(id, "not owned by this writer")
	}
	if err := p.confirm(ctx); err != nil {
		return err
	}
	target, ready := p.unprojected(prefix)
	if !ready {
		return errUnavailable(id, "catching up or moving between writers")
	}
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
		return errUnavailable(id, "waiting for the projector to apply recent writes")
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
