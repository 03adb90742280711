package writer

import (
	"context"
	"encoding/json"
	"time"

	"github.com/eskv/eskv/contract"
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

// elementRef names the member a set write decides on; ok is false for
// every other request (and for a denied one, decided on the state only).
func elementRef(r *Request) (projection.ElementRef, bool) {
	if r.Member == "" || r.Denied || r.Txn != nil {
		return projection.ElementRef{}, false
	}
	return projection.ElementRef{Collection: r.Key.String(), Member: r.Member}, true
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
	o.elems[e.Element.Member] = elementVersion(e)
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

// isMember decides whether a member whose kv_elements row has version
// elem (0: none) belongs to the set visible (nil: absent): a row older
// than the set's since belongs to an earlier set of the key.
func isMember(visible *contract.Entry, elem int64) (contract.CollectionMeta, bool, *contract.Error) {
	if visible == nil {
		return contract.CollectionMeta{}, false, nil
	}
	meta, err := collectionMeta(visible, contract.PurposeSet)
	if err != nil {
		return meta, false, err
	}
	return meta, elem > 0 && elem >= meta.Since, nil
}

// collectionMeta reads the metadata of a collection of purpose (set,
// list, queue) from its entry as a read sees it: nil is an absent, empty
// collection; an entry of another purpose, or without such metadata, is
// wrong_type naming what the key is.
func collectionMeta(visible *contract.Entry, purpose string) (contract.CollectionMeta, *contract.Error) {
	if visible == nil {
		return contract.CollectionMeta{Type: purpose}, nil
	}
	if visible.Semantics.Purpose != purpose {
		return contract.CollectionMeta{}, wrongType(visible, "key", "key %s is not a %s (its purpose is %s)", visible.Key, purpose, purposeOf(visible))
	}
	meta, err := contract.ParseCollectionMeta(visible.Value)
	if err != nil || meta.Type != purpose {
		return meta, wrongType(visible, "key", "key %s does not hold %s metadata", visible.Key, purpose)
	}
	return meta, nil
}

func purposeOf(e *contract.Entry) string {
	if e.Semantics.Purpose == "" {
		return "other"
	}
	return e.Semantics.Purpose
}

// DecideSet decides an sadd or srem of r.Member on the set's state cur,
// the member's kv_elements version elem (0: no row) and what known holds
// of r's requestId. It is pure. An sadd of a member already there and an
// srem of one that is not append nothing (Result.Changed false), as
// Redis answers 0; otherwise one event on the set's key carries the
// change (Event.Element) and the new metadata. The first sadd creates
// the set (since = its version); an srem leaves an empty set in place
// (size 0): DELETE removes a set.
//
// A blind request (r.Blind: its principal may not read the set) that
// changes nothing on a set that exists still appends one event, without
// an element and with the metadata unchanged: its version then moves by
// one whether the member was there or not, so neither the answer's
// version nor any later one tells the principal membership.
func DecideSet(cur contract.State, elem int64, known requestMemory, r *Request, now time.Time, epoch int64, window RequestWindow) decision {
	visible, d, done := decideCollectionRequest(cur, known, r, now, epoch, window)
	if done {
		return d
	}
	meta, present, err := isMember(visible, elem)
	if err != nil {
		return decision{err: err}
	}
	add := r.Op == contract.OpSAdd
	change := add != present
	if !change && (!r.Blind || visible == nil) { // nothing to change
		res := Result{Entry: contract.Entry{Key: r.Key.String()}}
		if visible != nil {
			res.Entry = *visible
		}
		return decision{result: res}
	}
	ev := newEvent(cur, r, now, epoch)
	ev.Op = r.Op
	if visible == nil {
		meta = contract.CollectionMeta{Type: contract.PurposeSet, Since: ev.Version}
	}
	if change {
		ev.Element = &contract.Element{Op: contract.ElementRemove, Member: r.Member}
		meta.Size--
		if add {
			ev.Element.Op = contract.ElementAdd
			meta.Size += 2
		}
	}
	after, merr := marshalCompact(meta)
	if merr != nil {
		return decision{err: contract.Errorf(contract.EInternal, "encode set metadata: %v", merr)}
	}
	ev.After = after
	d = finish(ev, visible, r, contract.PurposeSet, r.TTLSeconds == 0, now)
	d.result.Changed = change
	return d
}

// guardCollection refuses a plain write (put, increment, patch) of a
// collection: its metadata is the server's, kept by the collection's
// ops. A DELETE removes the whole collection (one event, whatever its
// size: the elements left behind are not read, CollectionMeta.Since).
func guardCollection(visible *contract.Entry, r *Request) *contract.Error {
	if visible == nil || !contract.IsCollectionPurpose(visible.Semantics.Purpose) || r.Op == contract.OpDelete {
		return nil
	}
	p := visible.Semantics.Purpose
	return wrongType(visible, "key", "key %s is a %s: use the %s operations, or DELETE it", visible.Key, p, p)
}

// ReadCard answers scard from the set's entry as a read sees it: 0 for
// an absent set.
func ReadCard(key contract.Key, e *contract.Entry) (contract.CardAnswer, error) {
	meta, _, err := isMember(e, 0)
	if err != nil {
		return contract.CardAnswer{}, err
	}
	return contract.CardAnswer{Set: key.String(), Size: meta.Size}, nil
}

// ReadIsMember answers sismember from the set's entry as a read sees it
// and the member's kv_elements version (0: none).
func ReadIsMember(key contract.Key, e *contract.Entry, elem int64) (contract.IsMemberAnswer, error) {
	_, present, err := isMember(e, elem)
	if err != nil {
		return contract.IsMemberAnswer{}, err
	}
	return contract.IsMemberAnswer{Set: key.String(), IsMember: present}, nil
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

// SetAnswer is the answer of an sadd or srem from its result.
func SetAnswer(op contract.Op, res Result) contract.SetChangeAnswer {
	a := contract.SetChangeAnswer{Set: res.Entry.Key, Version: res.Entry.Version}
	if meta, err := contract.ParseCollectionMeta(res.Entry.Value); err == nil && res.Entry.Value != nil {
		a.Size = meta.Size
	}
	changed := res.Changed
	if op == contract.OpSAdd {
		a.Added = &changed
	} else {
		a.Removed = &changed
	}
	return a
}

// elementVersion is the version of the kv_elements row of e's member
// after e: e's version after an add, 0 (no row) after a remove.
func elementVersion(e *contract.Event) int64 {
	if e.Element.Op == contract.ElementAdd {
		return e.Version
	}
	return 0
}

// decideCollectionRequest is what every collection write decides before
// its own op: a denied write's audit record, a requestId already used
// (replayed, stale or reused), a version mismatch. done reports that d is
// the decision; otherwise visible is the collection's entry at now. A
// replayed request is the key's latest write: it changed the collection.
func decideCollectionRequest(cur contract.State, known requestMemory, r *Request, now time.Time, epoch int64, window RequestWindow) (visible *contract.Entry, d decision, done bool) {
	if r.Denied {
		return nil, Decide(cur, r, now, epoch), true
	}
	prior, ok := known.get(r)
	if d, ok := decideRequestID(cur, prior, ok, r, now, window); ok {
		return nil, d, true
	}
	visible = cur.Visible(now)
	if d, done := replayOrMismatch(cur, visible, r, now); done {
		d.result.Changed = d.result.Replayed
		return nil, d, true
	}
	return visible, decision{}, false
}
