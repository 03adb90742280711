package writer

import (
	"context"
	"encoding/json"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
)

// Sets (docs/collections.md). A set is one key whose entry holds its
// metadata (contract.CollectionMeta: type set, size, since) and whose
// members are kv_elements rows. sadd and srem are decided by the
// partition's owner against the set's state and the membership of their
// one member, known from the overlay (the member's unprojected changes,
// kept in the set key's overlay entry and dropped with it) or else read
// in the round trip that reads the batch's states (one primary-key probe
// per member): nothing ever reads the whole set.

// withElement records e's element change in the overlay entry o of its
// key (after next): elems maps each member changed by an unprojected
// event to the version of its kv_elements row after it (0: removed).
func (o overlayEntry) withElement(prev overlayEntry, e *contract.Event) overlayEntry {
	o.elems, o.vals, o.items = prev.elems, prev.vals, prev.items
	if e.Element == nil {
		return o
	}
	if e.Op.IsQueueWrite() {
		return o // next records it with its offset (withItem)
	}
	if o.elems == nil {
		o.elems = make(map[string]int64)
	}
	o.elems[e.Element.Member] = decide.ElementVersion(e)
	if e.Element.Value != nil && e.Element.Op == contract.ElementAdd {
		if o.vals == nil {
			o.vals = make(map[string]json.RawMessage)
		}
		o.vals[e.Element.Member] = e.Element.Value
	} else {
		delete(o.vals, e.Element.Member)
	}
	return o
}

// Member returns the state of the set key and the version of member's
// kv_elements row (0: none) as the partition's owner knows them, like
// State: from the overlay when it holds the member's unprojected change,
// else from the projection (the set's state from the state cache when it
// holds it).
func (w *Writer) Member(ctx context.Context, key contract.Key, member string) (contract.State, int64, error) {
	id, p := w.partition(key)
	if p == nil {
		return contract.State{}, 0, errUnavailable(id, "not owned by this writer")
	}
	if err := p.confirm(ctx); err != nil {
		return contract.State{}, 0, err
	}
	p.mu.RLock()
	ready := p.ready
	e, in := p.overlay[key.String()]
	elem, known := e.elems[member]
	st := e.state
	if ready && !in {
		st, in = p.cache.get(key.String())
	}
	p.mu.RUnlock()
	if !ready {
		return contract.State{}, 0, errUnavailable(id, "catching up or moving between writers")
	}
	if !in {
		var err error
		if st, err = w.proj.State(ctx, key.String()); err != nil {
			return contract.State{}, 0, err
		}
	}
	if !known {
		var err error
		if elem, err = w.proj.Element(ctx, projection.ElementRef{Collection: key.String(), Member: member}); err != nil {
			return contract.State{}, 0, err
		}
	}
	return st, elem, nil
}
