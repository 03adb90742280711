package decide

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// txnNamespace is the UUIDv5 namespace of transaction ids.
var txnNamespace = [16]byte{0x0b, 0x6c, 0x6a, 0x9e, 0x2f, 0x55, 0x4f, 0x7e, 0x9a, 0x8e, 0x6f, 0x2b, 0x1c, 0x3d, 0x4e, 0x5f}

// txnID is the id of the transaction whose first event is (key,
// version): a UUIDv5 of that event's identity, unique because the log
// holds one event per (key, version), and found again from the key's
// state when a retry is answered as a replay, without storing it. A
// transaction that appends nothing (only checks, or rejected) gets a
// fresh UUIDv7.
func txnID(key string, version int64) string {
	return uuidV5(txnNamespace, key+"\x00"+strconv.FormatInt(version, 10))
}

// uuidV5 is the name-based UUID (RFC 9562 version 5, SHA-1) of name in
// namespace, in its canonical string form.
func uuidV5(namespace [16]byte, name string) string {
	h := sha1.New()
	h.Write(namespace[:])
	h.Write([]byte(name))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// digest identifies a whole transaction: its principal and each step,
// command (its digest, with or without a requestId) and condition. Every
// event of the transaction carries it as its requestDigest, so a retry
// is told from a reuse key by key.
func (c *Txn) digest() string {
	parts := []any{"txn", c.Principal}
	for _, s := range c.Steps {
		parts = append(parts, s.Write.digest(), s.Cond)
	}
	return digestSum(parts)
}

// Keys lists the keys whose state deciding c reads: its key, or each of
// a transaction's steps'.
func Keys(c Command) []string {
	t, ok := c.(*Txn)
	if !ok {
		return []string{c.Head().Key.String()}
	}
	ks := make([]string, len(t.Steps))
	for i, s := range t.Steps {
		ks[i] = s.Write.Key.String()
	}
	return ks
}

// requestRefs names the (key, requestId) pairs whose earlier uses
// deciding c consults (requestid.go): its requestId on each key it
// writes.
func (c *Txn) requestRefs() []RequestRef {
	if c.RequestID == "" {
		return nil
	}
	var refs []RequestRef
	for _, s := range c.Steps {
		if s.Write.Op != contract.OpCheck {
			refs = append(refs, RequestRef{Key: s.Write.Key.String(), RequestID: c.RequestID})
		}
	}
	return refs
}

// decideTxn decides a transaction against the states of its keys (every
// key of c.Steps must be in in.States; missing ones are taken as never
// written) and what in.Known holds of its requestId on each. It is pure, like kvWrite, which it applies to each write in
// order, each step seeing the steps before it (on a copy: states is not
// changed).
//
// Either every step passes — its condition holds and its write is
// accepted — and the decision appends one event per written key, in the
// order of the steps, all with the same TxnID and TxnSize, RequestID the
// transaction's and RequestDigest its digest; or the first step that
// fails rejects the whole transaction: no event, one conflict record for
// that step (TxnID, TxnOp, TxnSize) and its error, naming the step
// (contract.InOp). A condition that does not hold is version_conflict
// (version, exists) or field_mismatch (field equals), reason
// version_mismatch or field_mismatch; any other failure is the write's
// own error (not_found, wrong_type, ...), recorded with its code as the
// reason.
//
// With a requestId, a transaction whose every written key still holds it
// (same digest) as its latest write is answered as a replay of the
// results it left. Otherwise, a written key that remembers the requestId
// (as its latest write, or within the window among its older versions:
// in.Known, requestid.go) refuses the transaction with version_conflict on
// requestId: request_id_reused when another request used it,
// stale_request when this transaction applied before and the key changed
// since (applying it again would apply it twice).
func decideTxn(c *Txn, in Input, env Env) Decision {
	t := txn{c: c, states: in.States, env: &env, digest: c.digest()}
	if d, done := t.replay(in.Known); done {
		return d
	}
	local := make(map[string]keystate.State, len(c.Steps))
	state := func(k string) keystate.State {
		if s, ok := local[k]; ok {
			return s
		}
		return t.states[k]
	}
	results := make([]contract.TxnResult, len(c.Steps))
	var evs []*contract.Event
	for i, s := range c.Steps {
		k := s.Write.Key.String()
		// Conditions and conflict records name the step's command.
		w := newWrite(state(k), s.Write.common(), t.env)
		if s.Cond != nil {
			if d, failed := checkCondition(w, s.Cond, env.Equal); failed {
				return t.failed(i, w.visible, d)
			}
		}
		if s.Write.Op == contract.OpCheck {
			results[i] = contract.TxnResult{Key: k, Version: versionOf(w.cur, w.visible)}
			continue
		}
		if w.visible != nil && isLockPurpose(w.visible.Semantics.Purpose) {
			return t.failed(i, w.visible, Decision{Err: wrongType(w.visible, "key",
				"key %s is a %s: a transaction does not write locks or leaderships (use their operations; a check of its version fences a transaction by the lock's token)",
				k, w.visible.Semantics.Purpose)})
		}
		// The transaction's requestId was compared above, as a whole;
		// the step is decided as a write without one.
		sub := *s.Write
		sub.RequestID = ""
		w.c = sub.common()
		d := kvWrite(w, &sub)
		if d.Event == nil {
			return t.failed(i, w.visible, d)
		}
		ev := d.Event
		ev.RequestID, ev.RequestDigest = c.RequestID, t.digest
		local[k] = keystate.FromEvent(ev)
		evs = append(evs, ev)
		results[i] = contract.TxnResult{Key: k, Version: ev.Version}
		if ev.Live() {
			results[i].Value = ev.After
		}
	}
	return t.accepted(evs, results)
}

// txn is a transaction as it is decided: its command and digest, its
// keys' states before it, under env.
type txn struct {
	c      *Txn
	states map[string]keystate.State
	env    *Env
	digest string
}

// accepted appends evs, the transaction's events, under one id: the
// UUIDv5 of its first event, or a fresh id when it appends nothing.
func (t txn) accepted(evs []*contract.Event, results []contract.TxnResult) Decision {
	id := ""
	if len(evs) > 0 {
		id = txnID(evs[0].Key, evs[0].Version)
	} else {
		id = t.env.NewID()
	}
	for _, ev := range evs {
		ev.TxnID, ev.TxnSize = id, len(evs)
	}
	return Decision{Txn: evs, Result: Result{TxnID: id, Txn: results}}
}

// versionOf is the key's version as a read sees it: 0 when absent.
func versionOf(cur keystate.State, visible *contract.Entry) int64 {
	if visible == nil {
		return 0
	}
	return cur.Version
}

// step is step i of t as a write on its key's state before t.
func (t txn) step(i int) write {
	s := t.c.Steps[i].Write
	return newWrite(t.states[s.Key.String()], s.common(), t.env)
}

// replay answers a transaction with a requestId its keys remember:
// done reports whether d is the answer (a replay, a reuse or a stale
// retry).
func (t txn) replay(known Memory) (d Decision, done bool) {
	c := t.c
	if c.RequestID == "" {
		return Decision{}, false
	}
	same, fresh := -1, -1 // a written step whose key holds it as its latest write, and one that does not
	for i, s := range c.Steps {
		if s.Write.Op == contract.OpCheck {
			continue
		}
		k := s.Write.Key.String()
		cur := t.states[k]
		switch requestSeen(cur, c.RequestID, t.digest) {
		case seenOther:
			return t.refuse(i, "request_id_reused", "requestId %q was already used for a different write of key %s", c.RequestID, k), true
		case seenSame:
			same = i
			continue
		}
		prior, ok := known[RequestRef{Key: k, RequestID: c.RequestID}]
		switch {
		case !ok || !olderUse(cur, prior, c.RequestID, t.env):
		case prior.Digest != t.digest:
			return t.refuse(i, "request_id_reused", "requestId %q was already used for a different write of key %s (version %d)", c.RequestID, k, prior.Version), true
		default:
			return t.refuse(i, "stale_request", "requestId %q was already applied by this transaction at version %d of key %s, which is at version %d now: this retry is stale, nothing was written",
				c.RequestID, prior.Version, k, cur.Version), true
		}
		fresh = i
	}
	switch {
	case same < 0:
		return Decision{}, false
	case fresh >= 0:
		return t.refuse(fresh, "stale_request", "requestId %q was applied by this transaction before, and key %s has changed since: this retry is stale, nothing was written", c.RequestID, c.Steps[fresh].Write.Key.String()), true
	}
	return Decision{Result: t.replayed()}, true
}

// replayed is the answer of a transaction all of whose written keys hold
// it as their latest write: the results it left.
func (t txn) replayed() Result {
	c := t.c
	res := Result{Replayed: true, Txn: make([]contract.TxnResult, len(c.Steps))}
	for i, s := range c.Steps {
		k := s.Write.Key.String()
		cur := t.states[k]
		visible := cur.Visible(t.env.Now)
		res.Txn[i] = contract.TxnResult{Key: k, Version: versionOf(cur, visible)}
		if s.Write.Op == contract.OpCheck {
			continue
		}
		res.Txn[i].Version = cur.Version
		if cur.Live && s.Write.Op != contract.OpDelete {
			res.Txn[i].Value = cur.Entry.Value
		}
		if res.TxnID == "" {
			// The first written key's latest event is the transaction's
			// first event.
			res.TxnID = txnID(k, cur.Version)
		}
	}
	return res
}

// refuse rejects the transaction for its requestId, which step i's key
// contradicts (reason request_id_reused or stale_request).
func (t txn) refuse(i int, reason, format string, args ...any) Decision {
	w := t.step(i)
	d := t.failed(i, w.visible, conflictDecision(w, reason, format, args...))
	d.Err.(*contract.Error).Field = "requestId" // the transaction's, not the step's
	return d
}

// checkCondition evaluates condition c of w's step on its key: failed,
// with the conflict decision, when a member does not hold.
func checkCondition(w write, c *contract.Condition, equal func(a, b json.RawMessage) bool) (Decision, bool) {
	cur, visible, req := w.cur, w.visible, w.c
	current := versionOf(cur, visible)
	var d Decision
	switch {
	case c.Version != nil && *c.Version != current:
		d = conflictDecision(w, "version_mismatch",
			"expected version %d, current version is %d", *c.Version, current)
		d.Err.(*contract.Error).Field = "condition.version"
	case c.Exists != nil && *c.Exists != (visible != nil):
		what := "does not exist"
		if visible != nil {
			what = "exists"
		}
		d = conflictDecision(w, "version_mismatch",
			"key %s %s (current version %d)", req.Key.String(), what, current)
		d.Err.(*contract.Error).Field = "condition.exists"
	case c.Field != "" && !equal(fieldOf(visible, c.Field), c.Equals):
		d = conflictDecision(w, "field_mismatch",
			"field %q does not equal condition.equals", c.Field)
		d.Err.(*contract.Error).Field = "condition.equals"
	default:
		return Decision{}, false
	}
	return d, true
}

// fieldOf is the top-level field f of visible's value; null when the key
// is absent, its value no object, or the field missing.
func fieldOf(visible *contract.Entry, f string) json.RawMessage {
	if visible != nil {
		var fields map[string]json.RawMessage
		if json.Unmarshal(visible.Value, &fields) == nil {
			if v, ok := fields[f]; ok {
				return v
			}
		}
	}
	return json.RawMessage("null")
}

// failed rejects the transaction at step i, whose own decision d failed
// on visible, the key's entry as the step saw it: no event, one conflict
// record naming the step (d's, or one built for an error without a
// record, reason its code), and d's error naming the step, with the
// key's current entry.
func (t txn) failed(i int, visible *contract.Entry, d Decision) Decision {
	c := t.c
	e, ok := d.Err.(*contract.Error)
	if !ok {
		e = contract.Errorf(contract.EInternal, "%v", d.Err)
	}
	err := *e // Decide's errors may be shared values
	if err.Current == nil {
		err.Current = visible
	}
	rec := d.Conflict
	if rec == nil {
		var cur keystate.State
		if visible != nil {
			cur = keystate.State{Version: visible.Version, Live: true, Entry: *visible}
		}
		w := write{c: c.Steps[i].Write.common(), cur: cur, visible: visible, env: t.env}
		rec = conflictDecision(w, err.Code, "%s", err.Message).Conflict
		err.CorrelationID = rec.ID
	}
	rec.RequestID = c.RequestID
	rec.TxnID = t.env.NewID()
	rec.TxnOp, rec.TxnSize = &i, len(c.Steps)
	return Decision{Err: contract.InOp(i, &err), Conflict: rec}
}
