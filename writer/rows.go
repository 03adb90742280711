package writer

import (
	"context"
	"encoding/json"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
)

// Element rows (kv_elements) a batch decides on: a set's member, named
// by the request (decide.Plan.Elements, read in the round trip that reads
// the batch's states), or a list's end, named by the list's state
// (decide.Command.Row: read in one more round trip once the states are
// known, or probed when a second pop of one list reaches a position
// nobody asked for yet). Either comes from the batch's own decisions,
// else from the overlay (the collection's unprojected changes), else from
// one primary-key probe: nothing ever reads a whole collection.

// elemsKnown is what a batch knows of the kv_elements rows it decides on:
// each asked row's version (0: none) and, for a list element, its value.
type elemsKnown struct {
	versions map[decide.ElementRef]int64
	values   map[decide.ElementRef]json.RawMessage
	// q is what the batch knows of queue items (queuebatch.go).
	q *queueView
}

func newElemsKnown() elemsKnown {
	return elemsKnown{versions: make(map[decide.ElementRef]int64), values: make(map[decide.ElementRef]json.RawMessage),
		q: newQueueView()}
}

func (k elemsKnown) has(ref decide.ElementRef) bool {
	_, ok := k.versions[ref]
	return ok
}

// fromOverlay takes ref from the overlay entry e of its collection when
// e holds its unprojected change.
func (k elemsKnown) fromOverlay(e overlayEntry, ref decide.ElementRef) bool {
	v, in := e.elems[ref.Member]
	if in {
		k.versions[ref], k.values[ref] = v, e.vals[ref.Member]
	}
	return in
}

// found takes the element rows the projection answered.
func (k elemsKnown) found(f projection.Found) {
	for ref, v := range f.Elements {
		k.versions[decide.ElementRef(ref)] = v
	}
	for ref, v := range f.Values {
		k.values[decide.ElementRef(ref)] = v
	}
}

// row is the row ref as the batch knows it.
func (k elemsKnown) row(ref decide.ElementRef) decide.ElementRow {
	return decide.ElementRow{Version: k.versions[ref], Value: k.values[ref]}
}

// record notes the element change of ev, decided in this batch.
func (k elemsKnown) record(ev *contract.Event) {
	ref := decide.ElementRef{Collection: ev.Key, Member: ev.Element.Member}
	if ev.Op.IsQueueWrite() {
		k.q.batch[ref] = *ev.Element
		return
	}
	k.versions[ref] = decide.ElementVersion(ev)
	if ev.Element.Op == contract.ElementAdd && ev.Element.Value != nil {
		k.values[ref] = ev.Element.Value
	} else {
		delete(k.values, ref)
	}
}

// elementRefs converts refs for the projection.
func elementRefs(refs []decide.ElementRef) []projection.ElementRef {
	out := make([]projection.ElementRef, len(refs))
	for i, r := range refs {
		out[i] = projection.ElementRef(r)
	}
	return out
}

// askElements adds to q the element rows command c reads that the
// overlay does not hold (read lock held): those its plan names, and the
// row its key's state names when the overlay holds that state (a pop of
// a list the overlay holds: its end is known now, probed in this round
// trip unless unprojected).
func (p *partition) askElements(q *projection.Query, c decide.Command, plan *decide.Plan, elems elemsKnown, now time.Time) {
	for _, ref := range plan.Elements {
		if _, done := elems.versions[ref]; !done {
			v, in := p.overlay[ref.Collection].elems[ref.Member]
			elems.versions[ref] = v
			if !in {
				q.Elements = append(q.Elements, projection.ElementRef(ref))
			}
		}
	}
	e, in := p.overlay[c.Head().Key.String()]
	if !in {
		return
	}
	if ref, ok := c.Row(e.state, now); ok && !elems.has(ref) {
		if elems.fromOverlay(e, ref) {
			return
		}
		q.Elements = append(q.Elements, projection.ElementRef(ref))
		elems.versions[ref] = 0
	}
}

// rowsOfStates probes, in one more round trip, the rows the batch's
// commands name given their keys' states that the first round trip did
// not read (the ends of the lists it pops whose state was read there).
func (p *partition) rowsOfStates(ctx context.Context, batch []*call, states map[string]keystate.State, elems elemsKnown) error {
	now := time.Now()
	var refs []decide.ElementRef
	for _, c := range batch {
		cmd := c.command()
		if ref, ok := cmd.Row(states[c.head().Key.String()], now); ok && !elems.has(ref) {
			refs = append(refs, ref)
			elems.versions[ref] = 0
		}
	}
	if len(refs) == 0 {
		return nil
	}
	f, err := p.w.proj.Lookup(ctx, nil, nil, elementRefs(refs))
	if err != nil {
		return err
	}
	elems.found(f)
	return nil
}

// row is the row ref as the batch knows it, else from the overlay, else
// probed: a second pop of one list in a batch, after a trim, reaches a
// position nobody asked for yet.
func (p *partition) row(ctx context.Context, ref decide.ElementRef, elems elemsKnown) (decide.ElementRow, error) {
	if !elems.has(ref) {
		p.mu.RLock()
		e := p.overlay[ref.Collection]
		in := elems.fromOverlay(e, ref)
		p.mu.RUnlock()
		if !in {
			pref := projection.ElementRef(ref)
			f, err := p.w.proj.Lookup(ctx, nil, nil, []projection.ElementRef{pref})
			if err != nil {
				return decide.ElementRow{}, err
			}
			elems.versions[ref], elems.values[ref] = f.Elements[pref], f.Values[pref]
		}
	}
	return elems.row(ref), nil
}

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
func (w *Writer) Member(ctx context.Context, key contract.Key, member string) (keystate.State, int64, error) {
	id, p := w.partition(key)
	if p == nil {
		return keystate.State{}, 0, errUnavailable(id, "not owned by this writer")
	}
	if err := p.confirm(ctx); err != nil {
		return keystate.State{}, 0, err
	}
	p.mu.RLock()
	ready := p.ready
	e, in := p.overlay[key.String()]
	elem, known := e.elems[member]
	st := e.state
	if ready && !in {
		st, in = p.cache.Get(key.String())
	}
	p.mu.RUnlock()
	if !ready {
		return keystate.State{}, 0, errUnavailable(id, "catching up or moving between writers")
	}
	if !in {
		var err error
		if st, err = w.proj.State(ctx, key.String()); err != nil {
			return keystate.State{}, 0, err
		}
	}
	if !known {
		var err error
		if elem, err = w.proj.Element(ctx, projection.ElementRef{Collection: key.String(), Member: member}); err != nil {
			return keystate.State{}, 0, err
		}
	}
	return st, elem, nil
}
