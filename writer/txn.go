package writer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// TxnStep is one operation of a transaction: Req is a write (Op put,
// delete, increment or patch) or, with Op contract.OpCheck, a read-only
// condition on its key; Cond, when set, must hold for the step to apply.
// The API builds Req as the single-key write of the same op (with the
// transaction's principal), its ExpectedVersion from Cond.Version (or 0
// for Cond.Exists false) and a patch's If from Cond's field, so the
// events name the ops as single-key writes would (create, cas,
// field_cas).
type TxnStep struct {
	Req  *Request
	Cond *contract.Condition
}

// txnNamespace is the UUIDv5 namespace of transaction ids.
var txnNamespace = uuid.MustParse("0b6c6a9e-2f55-4f7e-9a8e-6f2b1c3d4e5f")

// txnID is the id of the transaction whose first event is (key,
// version): a UUIDv5 of that event's identity, unique because the log
// holds one event per (key, version), and found again from the key's
// state when a retry is answered as a replay, without storing it. A
// transaction that appends nothing (only checks, or rejected) gets a
// fresh UUIDv7.
func txnID(key string, version int64) string {
	return uuid.NewSHA1(txnNamespace, []byte(key+"\x00"+strconv.FormatInt(version, 10))).String()
}

// txnDigest identifies a whole transaction: its principal and each step,
// request and condition. Every event of the transaction carries it as
// its requestDigest, so a retry is told from a reuse key by key.
func txnDigest(r *Request) string {
	parts := []any{"txn", r.Principal}
	for _, s := range r.Txn {
		parts = append(parts, s.Req.Digest(), s.Cond)
	}
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// keys lists the keys whose state deciding r reads.
func (r *Request) keys() []string {
	if r.Txn == nil {
		return []string{r.Key.String()}
	}
	ks := make([]string, len(r.Txn))
	for i, s := range r.Txn {
		ks[i] = s.Req.Key.String()
	}
	return ks
}

// requestRefs names the (key, requestId) pairs whose earlier uses
// deciding r consults (requestid.go): r's own, or a transaction's
// requestId on each key it writes.
func requestRefs(r *Request) []projection.RequestRef {
	if r.Txn == nil {
		if ref, ok := requestRef(r); ok {
			return []projection.RequestRef{ref}
		}
		return nil
	}
	if r.RequestID == "" {
		return nil
	}
	var refs []projection.RequestRef
	for _, s := range r.Txn {
		if s.Req.Op != contract.OpCheck {
			refs = append(refs, projection.RequestRef{Key: s.Req.Key.String(), RequestID: r.RequestID})
		}
	}
	return refs
}

// DecideTxn decides a transaction against the states of its keys (every
// key of r.Txn must be in states; missing ones are taken as never
// written). It is pure, like Decide, which it applies to each write in
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
// known, requestid.go) refuses the transaction with version_conflict on
// requestId: request_id_reused when another request used it,
// stale_request when this transaction applied before and the key changed
// since (applying it again would apply it twice).
func DecideTxn(states map[string]contract.State, known requestMemory, r *Request, now time.Time, epoch int64, window RequestWindow) decision {
	digest := r.Digest()
	if d, done := txnReplay(states, known, r, digest, now, window); done {
		return d
	}
	local := make(map[string]contract.State, len(r.Txn))
	state := func(k string) contract.State {
		if s, ok := local[k]; ok {
			return s
		}
		return states[k]
	}
	results := make([]contract.TxnResult, len(r.Txn))
	var evs []*contract.Event
	for i, s := range r.Txn {
		k := s.Req.Key.String()
		cur := state(k)
		visible := cur.Visible(now)
		if s.Cond != nil {
			if d, failed := checkCondition(cur, visible, s, now); failed {
				return txnFailed(r, i, visible, d, now)
			}
		}
		if s.Req.Op == contract.OpCheck {
			results[i] = contract.TxnResult{Key: k, Version: versionOf(cur, visible)}
			continue
		}
		if visible != nil && isLockPurpose(visible.Semantics.Purpose) {
			return txnFailed(r, i, visible, decision{err: wrongType(visible, "key",
				"key %s is a %s: a transaction does not write locks or leaderships (use their operations; a check of its version fences a transaction by the lock's token)",
				k, visible.Semantics.Purpose)}, now)
		}
		// The transaction's requestId was compared above, as a whole;
		// the step is decided as a write without one.
		sub := *s.Req
		sub.RequestID = ""
		d := Decide(cur, &sub, now, epoch)
		if d.event == nil {
			return txnFailed(r, i, visible, d, now)
		}
		ev := d.event
		ev.RequestID, ev.RequestDigest = r.RequestID, digest
		local[k] = ev.State()
		evs = append(evs, ev)
		results[i] = contract.TxnResult{Key: k, Version: ev.Version}
		if ev.Live() {
			results[i].Value = ev.After
		}
	}
	id := uuid.Must(uuid.NewV7()).String()
	if len(evs) > 0 {
		id = txnID(evs[0].Key, evs[0].Version)
	}
	for _, ev := range evs {
		ev.TxnID, ev.TxnSize = id, len(evs)
	}
	return decision{txn: evs, result: Result{TxnID: id, Txn: results}}
}

// versionOf is the key's version as a read sees it: 0 when absent.
func versionOf(cur contract.State, visible *contract.Entry) int64 {
	if visible == nil {
		return 0
	}
	return cur.Version
}

// txnReplay answers a transaction with a requestId its keys remember:
// done reports whether d is the answer (a replay, a reuse or a stale
// retry).
func txnReplay(states map[string]contract.State, known requestMemory, r *Request, digest string, now time.Time, window RequestWindow) (d decision, done bool) {
	if r.RequestID == "" {
		return decision{}, false
	}
	same, fresh := -1, -1 // a written step whose key holds it as its latest write, and one that does not
	for i, s := range r.Txn {
		if s.Req.Op == contract.OpCheck {
			continue
		}
		k := s.Req.Key.String()
		cur := states[k]
		switch requestSeen(cur, r.RequestID, digest) {
		case seenOther:
			return refuse(states, r, i, now, "request_id_reused", "requestId %q was already used for a different write of key %s", r.RequestID, k), true
		case seenSame:
			same = i
			continue
		}
		prior, ok := known[projection.RequestRef{Key: k, RequestID: r.RequestID}]
		switch {
		case !olderUse(cur, prior, ok, r.RequestID, window, now):
		case prior.Digest != digest:
			return refuse(states, r, i, now, "request_id_reused", "requestId %q was already used for a different write of key %s (version %d)", r.RequestID, k, prior.Version), true
		default:
			return refuse(states, r, i, now, "stale_request", "requestId %q was already applied by this transaction at version %d of key %s, which is at version %d now: this retry is stale, nothing was written",
				r.RequestID, prior.Version, k, cur.Version), true
		}
		fresh = i
	}
	switch {
	case same < 0:
		return decision{}, false
	case fresh >= 0:
		return refuse(states, r, fresh, now, "stale_request", "requestId %q was applied by this transaction before, and key %s has changed since: this retry is stale, nothing was written", r.RequestID, r.Txn[fresh].Req.Key.String()), true
	}
	res := Result{Replayed: true, Txn: make([]contract.TxnResult, len(r.Txn))}
	for i, s := range r.Txn {
		k := s.Req.Key.String()
		cur := states[k]
		visible := cur.Visible(now)
		res.Txn[i] = contract.TxnResult{Key: k, Version: versionOf(cur, visible)}
		if s.Req.Op == contract.OpCheck {
			continue
		}
		res.Txn[i].Version = cur.Version
		if cur.Live && s.Req.Op != contract.OpDelete {
			res.Txn[i].Value = cur.Entry.Value
		}
		if res.TxnID == "" {
			// The first written key's latest event is the transaction's
			// first event.
			res.TxnID = txnID(k, cur.Version)
		}
	}
	return decision{result: res}, true
}

// refuse rejects transaction r for its requestId, which step i's key
// contradicts (reason request_id_reused or stale_request).
func refuse(states map[string]contract.State, r *Request, i int, now time.Time, reason, format string, args ...any) decision {
	s := r.Txn[i]
	cur := states[s.Req.Key.String()]
	visible := cur.Visible(now)
	d := txnFailed(r, i, visible, conflictDecision(cur, visible, s.Req, now, reason, format, args...), now)
	d.err.(*contract.Error).Field = "requestId" // the transaction's, not the step's
	return d
}

// checkCondition evaluates step s's condition on its key: failed, with
// the conflict decision, when a member does not hold.
func checkCondition(cur contract.State, visible *contract.Entry, s TxnStep, now time.Time) (decision, bool) {
	c, req := s.Cond, s.Req
	current := versionOf(cur, visible)
	var d decision
	switch {
	case c.Version != nil && *c.Version != current:
		d = conflictDecision(cur, visible, req, now, "version_mismatch",
			"expected version %d, current version is %d", *c.Version, current)
		d.err.(*contract.Error).Field = "condition.version"
	case c.Exists != nil && *c.Exists != (visible != nil):
		what := "does not exist"
		if visible != nil {
			what = "exists"
		}
		d = conflictDecision(cur, visible, req, now, "version_mismatch",
			"key %s %s (current version %d)", req.Key.String(), what, current)
		d.err.(*contract.Error).Field = "condition.exists"
	case c.Field != "" && !jsonEqual(fieldOf(visible, c.Field), c.Equals):
		d = conflictDecision(cur, visible, req, now, "field_mismatch",
			"field %q does not equal condition.equals", c.Field)
		d.err.(*contract.Error).Field = "condition.equals"
	default:
		return decision{}, false
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

// txnFailed rejects transaction r at step i, whose own decision d failed
// on visible, the key's entry as the step saw it: no event, one conflict
// record naming the step (d's, or one built for an error without a
// record, reason its code), and d's error naming the step, with the
// key's current entry.
func txnFailed(r *Request, i int, visible *contract.Entry, d decision, now time.Time) decision {
	s := r.Txn[i]
	e, ok := d.err.(*contract.Error)
	if !ok {
		e = contract.Errorf(contract.EInternal, "%v", d.err)
	}
	err := *e // Decide's errors may be shared values
	if err.Current == nil {
		err.Current = visible
	}
	c := d.conflict
	if c == nil {
		var cur contract.State
		if visible != nil {
			cur = contract.State{Version: visible.Version, Live: true, Entry: *visible}
		}
		c = conflictDecision(cur, visible, s.Req, now, err.Code, "%s", err.Message).conflict
		err.CorrelationID = c.ID
	}
	c.RequestID = r.RequestID
	c.TxnID = uuid.Must(uuid.NewV7()).String()
	c.TxnOp, c.TxnSize = &i, len(r.Txn)
	return decision{err: contract.InOp(i, &err), conflict: c}
}
