package decide

import (
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/elemkey"
	"github.com/eskv/eskv/projection/keystate"
)

// Lists (docs/collections.md, events/list.go). A list's metadata holds
// its head position and size; its elements are the kv_elements rows at
// positions head .. head+size-1. Every list write is decided on the
// metadata and at most one element: a push writes position head-1
// (lpush) or head+size (rpush), a pop removes the row at either end (its
// value, for the answer and the event, comes from the overlay or one
// primary-key probe), and ltrim only moves head and size: O(1) whatever
// the list's length.

// listMeta reads a list's metadata from its entry as a read sees it
// (nil: absent, an empty list).
func listMeta(visible *contract.Entry) (contract.CollectionMeta, *contract.Error) {
	return collectionMeta(visible, contract.PurposeList)
}

// popRef names the element a pop c would remove given the list's state
// cur: ok is false for every other list write, and for a pop of an
// empty, missing or non-list key (decided on the state alone).
func popRef(cur keystate.State, c *List, now time.Time) (ElementRef, bool) {
	if c.Op != contract.OpLPop && c.Op != contract.OpRPop {
		return ElementRef{}, false
	}
	meta, err := listMeta(cur.Visible(now))
	if err != nil || meta.Size == 0 {
		return ElementRef{}, false
	}
	pos := meta.Head
	if c.Op == contract.OpRPop {
		pos = meta.Head + meta.Size - 1
	}
	return ElementRef{Collection: c.Key.String(), Member: elemkey.ListPosition(pos)}, true
}

// decideList decides a list write c (lpush, rpush, lpop, rpop, ltrim) on
// the list's state (in.State), its end (in.Element, for a pop: the row
// at the end it removes, named by popRef) and what in.Known holds of c's
// requestId. It is pure.
// The first push creates the list (since = its version, head 0); a pop
// of an empty or missing list is 404 not_found and appends nothing; an
// ltrim that keeps every element appends nothing (Result.Changed false)
// unless it is blind (c.Blind: its principal may not read the list),
// and one that keeps none leaves an empty list (DELETE removes a list).
func decideList(c *List, in Input, env Env) Decision {
	w := newWrite(in.State, c.common(), &env)
	d, done := decideCollectionRequest(w, in.Known)
	if done {
		if d.Result.Replayed && d.Result.Element == nil {
			d.Result.Element = replayedPop(in.State, in.Known, &c.Header)
		}
		return d
	}
	visible, end := w.visible, in.Element
	meta, err := listMeta(visible)
	if err != nil {
		return Decision{Err: err}
	}
	ev := newEvent(w)
	ev.Op = c.Op
	if visible == nil {
		meta.Since = ev.Version
	}
	switch c.Op {
	case contract.OpLPush, contract.OpRPush:
		pos := meta.Head + meta.Size
		if c.Op == contract.OpLPush {
			pos = meta.Head - 1
			meta.Head = pos
		}
		meta.Size++
		ev.Element = &contract.Element{Op: contract.ElementAdd, Member: elemkey.ListPosition(pos), Value: c.Value}
	case contract.OpLPop, contract.OpRPop:
		if visible == nil || meta.Size == 0 {
			return Decision{Err: contract.FieldErrorf(contract.ENotFound, "key", "list %s is empty or does not exist", c.Key)}
		}
		pos := meta.Head + meta.Size - 1
		if c.Op == contract.OpLPop {
			pos = meta.Head
			meta.Head++
		}
		if end.Version < meta.Since || end.Version == 0 {
			// The metadata names an element the projection and
			// the overlay do not hold: never answer a wrong value.
			return Decision{Err: contract.Errorf(contract.EInternal, "list %s: no element at its position %d", c.Key, pos)}
		}
		meta.Size--
		ev.Element = &contract.Element{Op: contract.ElementRemove, Member: elemkey.ListPosition(pos), Value: end.Value}
	case contract.OpLTrim:
		from, to, ok := elemkey.ListRange(c.Start, c.Stop, meta.Size)
		keepsAll := ok && from == 0 && to == meta.Size-1 || !ok && meta.Size == 0
		// A blind trim (its principal may not read the list) that keeps
		// every element still appends, the metadata unchanged: whether
		// it appended would tell the list's length.
		if keepsAll && !c.Blind || visible == nil {
			res := Result{Entry: contract.Entry{Key: c.Key.String()}}
			if visible != nil {
				res.Entry = *visible
			}
			return Decision{Result: res}
		}
		if ok {
			meta.Head += from
			meta.Size = to - from + 1
		} else {
			meta.Head += meta.Size
			meta.Size = 0
		}
	default:
		return Decision{Err: contract.Errorf(contract.EInternal, "%s is not a list write", c.Op)}
	}
	after, merr := marshalCompact(meta)
	if merr != nil {
		return Decision{Err: contract.Errorf(contract.EInternal, "encode list metadata: %v", merr)}
	}
	ev.After = after
	d = finish(w, ev, contract.PurposeList, c.TTLSeconds == 0)
	d.Result.Changed = true
	d.Result.Element = ev.Element
	return d
}

// replayedPop is the element change a replay of h (the list's latest
// write, at cur) answers: for a pop (of a list or a queue), the element
// it popped (a list's value, a queue's item), as known from
// the overlay, the batch or kv_history (AppliedRequest.Popped); nil for
// every other write, and when nothing holds the value any more (history
// retention deleted its Event: the replay answers no value). The replay
// of an older pop carries its element already (replayOlderPop).
func replayedPop(cur keystate.State, known Memory, h *Header) *contract.Element {
	if !isPop(h.Op) {
		return nil
	}
	a, ok := known.get(h, false)
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

// common is what the rules every single-key family shares read of c: a
// push attempts its value; a list write gives no semantics.
func (c *List) common() common {
	cm := common{Header: &c.Header, ExpectedVersion: c.ExpectedVersion, TTLSeconds: c.TTLSeconds, Attempted: c.Value, ConflictOp: c.Op}
	if c.RequestID != "" {
		cm.Digest = c.digest()
	}
	return cm
}

// digest is c's request digest (requestid.go): a collection write's
// parts, then an ltrim's range.
func (c *List) digest() string {
	parts := collectionParts(&c.Header, c.Value, c.ExpectedVersion, c.TTLSeconds)
	if c.Op == contract.OpLTrim {
		parts = append(parts, "range", c.Start, c.Stop)
	}
	return digestSum(parts)
}
