package decide

import (
	"github.com/eskv/eskv/contract"
)

// Sets (docs/collections.md). A set is one key whose entry holds its
// metadata (contract.CollectionMeta: type set, size, since) and whose
// members are kv_elements rows. sadd and srem are decided by the
// partition's owner against the set's state and the membership of their
// one member, known from the overlay (the member's unprojected changes,
// kept in the set key's overlay entry and dropped with it) or else read
// in the round trip that reads the batch's states (one primary-key probe
// per member): nothing ever reads the whole set.

// memberRef names the member a set write decides on (a denied one is a
// KV command, decided on the state only); ok is false without a member.
func memberRef(c *Set) (ElementRef, bool) {
	if c.Member == "" {
		return ElementRef{}, false
	}
	return ElementRef{Collection: c.Key.String(), Member: c.Member}, true
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

// decideSet decides an sadd or srem of c.Member on the set's state
// (in.State), the member's kv_elements version (in.Element.Version, 0: no
// row) and what in.Known holds of c's requestId. It is pure. An sadd of a member already there and an
// srem of one that is not append nothing (Result.Changed false), as
// Redis answers 0; otherwise one event on the set's key carries the
// change (Event.Element) and the new metadata. The first sadd creates
// the set (since = its version); an srem leaves an empty set in place
// (size 0): DELETE removes a set.
//
// A blind request (c.Blind: its principal may not read the set) that
// changes nothing on a set that exists still appends one event, without
// an element and with the metadata unchanged: its version then moves by
// one whether the member was there or not, so neither the answer's
// version nor any later one tells the principal membership.
func decideSet(c *Set, in Input, env Env) Decision {
	w := newWrite(in.State, c.common(), &env)
	d, done := decideCollectionRequest(w, in.Known)
	if done {
		return d
	}
	visible := w.visible
	meta, present, err := isMember(visible, in.Element.Version)
	if err != nil {
		return Decision{Err: err}
	}
	add := c.Op == contract.OpSAdd
	change := add != present
	if !change && (!c.Blind || visible == nil) { // nothing to change
		res := Result{Entry: contract.Entry{Key: c.Key.String()}}
		if visible != nil {
			res.Entry = *visible
		}
		return Decision{Result: res}
	}
	ev := newEvent(w)
	ev.Op = c.Op
	if visible == nil {
		meta = contract.CollectionMeta{Type: contract.PurposeSet, Since: ev.Version}
	}
	if change {
		ev.Element = &contract.Element{Op: contract.ElementRemove, Member: c.Member}
		meta.Size--
		if add {
			ev.Element.Op = contract.ElementAdd
			meta.Size += 2
		}
	}
	after, merr := marshalCompact(meta)
	if merr != nil {
		return Decision{Err: contract.Errorf(contract.EInternal, "encode set metadata: %v", merr)}
	}
	ev.After = after
	d = finish(w, ev, contract.PurposeSet, c.TTLSeconds == 0)
	d.Result.Changed = change
	return d
}

// guardCollection refuses a plain write (put, increment, patch) of a
// collection: its metadata is the server's, kept by the collection's
// ops. A DELETE removes the whole collection (one event, whatever its
// size: the elements left behind are not read, CollectionMeta.Since).
func guardCollection(visible *contract.Entry, op contract.Op) *contract.Error {
	if visible == nil || !contract.IsCollectionPurpose(visible.Semantics.Purpose) || op == contract.OpDelete {
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

// ElementVersion is the version of the kv_elements row of e's member
// after e: e's version after an add, 0 (no row) after a remove.
func ElementVersion(e *contract.Event) int64 {
	if e.Element.Op == contract.ElementAdd {
		return e.Version
	}
	return 0
}

// decideCollectionRequest is what every collection write decides before
// its own op (a denied one is a KV command): a requestId already used
// (replayed, stale or reused), a version mismatch. done reports that d is
// the decision. A replayed request is the key's latest write: it changed
// the collection.
func decideCollectionRequest(w write, known Memory) (d Decision, done bool) {
	if d, ok := decideRequestID(w, known); ok {
		return d, true
	}
	if d, done := replayOrMismatch(w); done {
		d.Result.Changed = d.Result.Replayed
		return d, true
	}
	return Decision{}, false
}

// common is what the rules every single-key family shares read of c: a
// set write attempts no value and gives no semantics.
func (c *Set) common() common {
	cm := common{Header: &c.Header, ExpectedVersion: c.ExpectedVersion, TTLSeconds: c.TTLSeconds, ConflictOp: c.Op}
	if c.RequestID != "" {
		cm.Digest = c.digest()
	}
	return cm
}

// digest is c's request digest (requestid.go): a collection write's
// parts, then its member.
func (c *Set) digest() string {
	parts := collectionParts(&c.Header, nil, c.ExpectedVersion, c.TTLSeconds)
	if c.Member != "" { // only then: older digests keep their parts
		parts = append(parts, "member", c.Member)
	}
	return digestSum(parts)
}
