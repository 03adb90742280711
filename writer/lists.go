package writer

import (
	"context"
	"encoding/json"
	"maps"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// Lists (docs/collections.md, events/list.go). A list's metadata holds
// its head position and size; its elements are the kv_elements rows at
// positions head .. head+size-1. Every list write is decided on the
// metadata and at most one element: a push writes position head-1
// (lpush) or head+size (rpush), a pop removes the row at either end (its
// value, for the answer and the event, comes from the overlay or one
// primary-key probe), and ltrim only moves head and size: O(1) whatever
// the list's length.

// listElem is a list element's kv_elements row as the writer knows it:
// the version that wrote it (0: no row) and its value.
type listElem struct {
	version int64
	value   json.RawMessage
}

// listMeta reads a list's metadata from its entry as a read sees it
// (nil: absent, an empty list).
func listMeta(visible *contract.Entry) (contract.CollectionMeta, *contract.Error) {
	return collectionMeta(visible, contract.PurposeList)
}

// popRef names the element a pop of r would remove given the list's
// state cur: ok is false for every other request, and for a pop of an
// empty, missing or non-list key (decided on the state alone).
func popRef(cur contract.State, r *Request, now time.Time) (projection.ElementRef, bool) {
	if (r.Op != contract.OpLPop && r.Op != contract.OpRPop) || r.Denied || r.Txn != nil {
		return projection.ElementRef{}, false
	}
	meta, err := listMeta(cur.Visible(now))
	if err != nil || meta.Size == 0 {
		return projection.ElementRef{}, false
	}
	pos := meta.Head
	if r.Op == contract.OpRPop {
		pos = meta.Head + meta.Size - 1
	}
	return projection.ElementRef{Collection: r.Key.String(), Member: projection.ListPosition(pos)}, true
}

// DecideList decides a list write r (lpush, rpush, lpop, rpop, ltrim) on
// the list's state cur, end (for a pop: the row at the end it removes,
// named by popRef) and what known holds of r's requestId. It is pure.
// The first push creates the list (since = its version, head 0); a pop
// of an empty or missing list is 404 not_found and appends nothing; an
// ltrim that keeps every element appends nothing (Result.Changed false)
// unless it is blind (r.Blind: its principal may not read the list),
// and one that keeps none leaves an empty list (DELETE removes a list).
func DecideList(cur contract.State, end listElem, known requestMemory, r *Request, now time.Time, epoch int64, window RequestWindow) decision {
	visible, d, done := decideCollectionRequest(cur, known, r, now, epoch, window)
	if done {
		if d.result.Replayed && d.result.Element == nil {
			d.result.Element = replayedPop(cur, known, r)
		}
		return d
	}
	meta, err := listMeta(visible)
	if err != nil {
		return decision{err: err}
	}
	ev := newEvent(cur, r, now, epoch)
	ev.Op = r.Op
	if visible == nil {
		meta.Since = ev.Version
	}
	switch r.Op {
	case contract.OpLPush, contract.OpRPush:
		pos := meta.Head + meta.Size
		if r.Op == contract.OpLPush {
			pos = meta.Head - 1
			meta.Head = pos
		}
		meta.Size++
		ev.Element = &contract.Element{Op: contract.ElementAdd, Member: projection.ListPosition(pos), Value: r.Value}
	case contract.OpLPop, contract.OpRPop:
		if visible == nil || meta.Size == 0 {
			return decision{err: contract.FieldErrorf(contract.ENotFound, "key", "list %s is empty or does not exist", r.Key)}
		}
		pos := meta.Head + meta.Size - 1
		if r.Op == contract.OpLPop {
			pos = meta.Head
			meta.Head++
		}
		if end.version < meta.Since || end.version == 0 {
			// The metadata names an element the projection and
			// the overlay do not hold: never answer a wrong value.
			return decision{err: contract.Errorf(contract.EInternal, "list %s: no element at its position %d", r.Key, pos)}
		}
		meta.Size--
		ev.Element = &contract.Element{Op: contract.ElementRemove, Member: projection.ListPosition(pos), Value: end.value}
	case contract.OpLTrim:
		from, to, ok := projection.ListRange(r.Start, r.Stop, meta.Size)
		keepsAll := ok && from == 0 && to == meta.Size-1 || !ok && meta.Size == 0
		// A blind trim (its principal may not read the list) that keeps
		// every element still appends, the metadata unchanged: whether
		// it appended would tell the list's length.
		if keepsAll && !r.Blind || visible == nil {
			res := Result{Entry: contract.Entry{Key: r.Key.String()}}
			if visible != nil {
				res.Entry = *visible
			}
			return decision{result: res}
		}
		if ok {
			meta.Head += from
			meta.Size = to - from + 1
		} else {
			meta.Head += meta.Size
			meta.Size = 0
		}
	default:
		return decision{err: contract.Errorf(contract.EInternal, "%s is not a list write", r.Op)}
	}
	after, merr := marshalCompact(meta)
	if merr != nil {
		return decision{err: contract.Errorf(contract.EInternal, "encode list metadata: %v", merr)}
	}
	ev.After = after
	d = finish(ev, visible, r, contract.PurposeList, r.TTLSeconds == 0, now)
	d.result.Changed = true
	d.result.Element = ev.Element
	return d
}

// replayedPop is the element change a replay of r (the list's latest
// write, at cur) answers: for a pop (of a list or a queue), the element
// it popped (a list's value, a queue's item), as known from
// the overlay, the batch or kv_history (AppliedRequest.Popped); nil for
// every other write, and when nothing holds the value any more (history
// retention deleted its event: the replay answers no value). The replay
// of an older pop carries its element already (replayOlderPop).
func replayedPop(cur contract.State, known requestMemory, r *Request) *contract.Element {
	if !r.Op.IsPop() {
		return nil
	}
	a, ok := known.get(r)
	if !ok || a.Version != cur.Version || a.Popped == nil {
		return nil
	}
	el := *a.Popped
	return &el
}

// ReadLen answers llen from the list's entry as a read sees it: 0 for
// an absent list.
func ReadLen(key contract.Key, e *contract.Entry) (contract.LenAnswer, error) {
	meta, err := listMeta(e)
	if err != nil {
		return contract.LenAnswer{}, err
	}
	return contract.LenAnswer{List: key.String(), Length: meta.Size}, nil
}

// ListAnswer is the answer of a list write from its result.
func ListAnswer(res Result) contract.ListChangeAnswer {
	a := contract.ListChangeAnswer{List: res.Entry.Key, Version: res.Entry.Version}
	if meta, err := contract.ParseCollectionMeta(res.Entry.Value); err == nil && res.Entry.Value != nil {
		a.Length = meta.Size
	}
	if res.Element != nil {
		a.Value = res.Element.Value
	}
	return a
}

// elemsKnown is what a batch knows of the kv_elements rows it decides on:
// each asked row's version (0: none) and, for a list element, its value.
type elemsKnown struct {
	versions map[projection.ElementRef]int64
	values   map[projection.ElementRef]json.RawMessage
	// q is what the batch knows of queue items (queuebatch.go).
	q *queueView
}

func newElemsKnown() elemsKnown {
	return elemsKnown{versions: make(map[projection.ElementRef]int64), values: make(map[projection.ElementRef]json.RawMessage),
		q: newQueueView()}
}

func (k elemsKnown) has(ref projection.ElementRef) bool {
	_, ok := k.versions[ref]
	return ok
}

// fromOverlay takes ref from the overlay entry e of its collection when
// e holds its unprojected change.
func (k elemsKnown) fromOverlay(e overlayEntry, ref projection.ElementRef) bool {
	v, in := e.elems[ref.Member]
	if in {
		k.versions[ref], k.values[ref] = v, e.vals[ref.Member]
	}
	return in
}

// record notes the element change of ev, decided in this batch.
func (k elemsKnown) record(ev *contract.Event) {
	ref := projection.ElementRef{Collection: ev.Key, Member: ev.Element.Member}
	if ev.Op.IsQueueWrite() {
		k.q.batch[ref] = *ev.Element
		return
	}
	k.versions[ref] = elementVersion(ev)
	if ev.Element.Op == contract.ElementAdd && ev.Element.Value != nil {
		k.values[ref] = ev.Element.Value
	} else {
		delete(k.values, ref)
	}
}

// listEnds probes, in one more round trip, the ends of the lists the
// batch pops that the overlay did not hold (their head was known only
// once their state was read).
func (p *partition) listEnds(ctx context.Context, batch []*call, states map[string]contract.State, elems elemsKnown) error {
	now := time.Now()
	var refs []projection.ElementRef
	for _, c := range batch {
		if ref, ok := popRef(states[c.req.Key.String()], c.req, now); ok && !elems.has(ref) {
			refs = append(refs, ref)
			elems.versions[ref] = 0
		}
	}
	if len(refs) == 0 {
		return nil
	}
	f, err := p.w.proj.Lookup(ctx, nil, nil, refs)
	if err != nil {
		return err
	}
	maps.Copy(elems.versions, f.Elements)
	maps.Copy(elems.values, f.Values)
	return nil
}

// listEnd is the element a list write r removes (for a pop), as the batch
// knows it, else probed: a second pop of one list in a batch, after a
// trim, reaches a position nobody asked for yet.
func (p *partition) listEnd(ctx context.Context, cur contract.State, r *Request, now time.Time, elems elemsKnown) (listElem, error) {
	ref, ok := popRef(cur, r, now)
	if !ok {
		return listElem{}, nil
	}
	if !elems.has(ref) {
		p.mu.RLock()
		e := p.overlay[ref.Collection]
		in := elems.fromOverlay(e, ref)
		p.mu.RUnlock()
		if !in {
			f, err := p.w.proj.Lookup(ctx, nil, nil, []projection.ElementRef{ref})
			if err != nil {
				return listElem{}, err
			}
			elems.versions[ref], elems.values[ref] = f.Elements[ref], f.Values[ref]
		}
	}
	return listElem{version: elems.versions[ref], value: elems.values[ref]}, nil
}
