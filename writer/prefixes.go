package writer

import (
	"context"
	"strings"
	"time"

	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
)

// Prefix writes (decide.Plan.Prefixes: a range delete, an expireDue)
// read every key under a prefix. Every write of the partition is either
// in the overlay or projected (an overlay entry is trimmed only once the
// projector passed it), and the overlay is read first, so the keys under
// a prefix are the overlay's under it, the projection's (KeysUnder) and
// those the batch's own decisions wrote before the write (rd.states):
// no wait for the projector, unlike a listing (AwaitProjected).

// prefixed is a command that reads the keys under a prefix.
type prefixed interface{ Ref() decide.PrefixRef }

// overlayUnder takes into rd the states of the overlay's keys under ref
// and counts them (read lock held): the projection is asked for that
// many keys more, since the overlay may have deleted as many of its own.
func (p *partition) overlayUnder(ref decide.PrefixRef, rd *batchReads) {
	n := 0
	for k, e := range p.overlay {
		if k > ref.After && strings.HasPrefix(k, ref.Prefix) {
			rd.states[k] = e.state
			n++
		}
	}
	rd.under[ref] = n
}

// readUnder reads from the projection the keys under each prefix the
// batch plans, and adds to q those of their states neither rd, the
// overlay nor the state cache holds. A prefix whose read filled its
// limit gets a bound (rd.bounds): keys past its last one were not read.
func (p *partition) readUnder(ctx context.Context, q *projection.Query, rd *batchReads, now time.Time) error {
	if len(rd.under) == 0 {
		return nil
	}
	var listed []string
	for ref, overlaid := range rd.under {
		limit := ref.Limit + 1 + overlaid
		keys, err := p.w.proj.KeysUnder(ctx, ref.Prefix, ref.After, limit, ref.Due, now)
		if err != nil {
			return err
		}
		if len(keys) == limit {
			rd.bounds[ref] = keys[len(keys)-1]
		}
		listed = append(listed, keys...)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	asked := make(map[string]bool, len(q.Keys))
	for _, k := range q.Keys {
		asked[k] = true
	}
	for _, k := range listed {
		if _, seen := rd.states[k]; seen || asked[k] {
			continue
		}
		if e, in := p.overlay[k]; in {
			rd.states[k] = e.state
		} else if st, cached := p.cache.Get(k); cached {
			rd.states[k] = st
		} else {
			asked[k] = true
			q.Keys = append(q.Keys, k)
		}
	}
	return nil
}

// underKeys is what a prefix write reads under ref once the batch
// decided the writes before it: every key under the prefix after the
// cursor whose state the batch holds (the overlay's, the projection's
// and those its decisions wrote), and the bound of the projection's read.
func (rd *batchReads) underKeys(ref decide.PrefixRef) decide.PrefixKeys {
	u := decide.PrefixKeys{Bound: rd.bounds[ref]}
	for k := range rd.states {
		if k > ref.After && strings.HasPrefix(k, ref.Prefix) {
			u.Keys = append(u.Keys, k)
		}
	}
	return u
}
