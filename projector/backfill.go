package projector

import (
	"context"
	"slices"
	"time"

	"github.com/eskv/eskv/projection"
)

// Field indexes a project declares start building (projection.Store.
// Backfill): the projector that owns the declaration's partition writes
// the field's kv_fields rows of the project's existing keys, one bounded
// step (projection.BackfillStep keys, one short transaction) at a time,
// beside its applies and paced, so that a project of millions of keys
// never holds the batches back: an apply of the project waits at most for
// one step. The rows of a field a project stops declaring are cleared the
// same way, when no field is left to build.

// Backfill's pacing: the pause after a step when more may be left, and
// how often an idle projector looks for fields to build.
const (
	backfillPause = 20 * time.Millisecond
	backfillIdle  = time.Second
)

// backfill builds the declared fields of the partitions this projector
// owns, and clears the rows of those no longer declared, until ctx ends.
func (p *Projector) backfill(ctx context.Context) {
	for {
		more := false
		if parts := p.owned(); len(parts) > 0 {
			var err error
			more, err = p.store.Backfill(ctx, parts, projection.BackfillStep)
			if err != nil && ctx.Err() == nil {
				p.log.Warn("building a field index failed; retrying", "err", err)
				more = false
			}
		}
		wait := backfillIdle
		if more {
			wait = backfillPause
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// own records partitions as this projector's (on assignment), or no
// longer (on revocation).
func (p *Projector) own(parts []int32, yes bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, part := range parts {
		if yes {
			p.ownedParts[part] = true
		} else {
			delete(p.ownedParts, part)
		}
	}
}

// owned returns the partitions this projector owns, in order.
func (p *Projector) owned() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int32, 0, len(p.ownedParts))
	for part := range p.ownedParts {
		out = append(out, part)
	}
	slices.Sort(out)
	return out
}
