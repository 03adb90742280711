package decide

import (
	"encoding/json"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// untaggedIf is a field condition as digests and conflict records encode
// it: {"Field":...,"Equals":...}.
func untaggedIf(c *contract.FieldCondition) any {
	if c == nil {
		return nil
	}
	return &struct {
		Field  string
		Equals json.RawMessage
	}{c.Field, c.Equals}
}

// Result is the outcome of an accepted write.
type Result struct {
	// Entry is the entry after a put; after a delete only Key and Version
	// are set.
	Entry contract.Entry
	// Replayed is true when the request repeated the last write with the
	// same requestId and body, so nothing new was written.
	Replayed bool
	// Changed is set by an sadd or srem that added or removed its
	// member (or a replay of one); false when it appended nothing.
	Changed bool
	// Element is the element change of an accepted list write (the
	// value pushed or popped); on a replayed pop, the value it popped
	// (Member unset); nil on any other replay.
	Element *contract.Element
	// Deduplicated is set on a qpush that appended nothing because an
	// item with its dedupId was pushed within the window (Element).
	Deduplicated bool
	// TxnID and Txn are a transaction's: its id and each step's result,
	// in order (values unmasked: the API hides what the caller may not
	// read).
	TxnID string
	Txn   []contract.TxnResult
	// Range is a prefix write's answer (a range delete's, an
	// expireDue's).
	Prefix contract.PrefixAnswer
	// Session is a session write's answer (create, keepalive, revoke,
	// or a DELETE of a session's key).
	Session contract.SessionAnswer
}

// Decision is what a command concluded.
type Decision struct {
	Event    *contract.Event   // to append, when accepted
	Txn      []*contract.Event // a transaction's events, to append together
	Conflict *Conflict         // to record in kv.conflicts, when rejected by CAS
	Err      error             // the answer when not accepted
	Result   Result            // the answer when accepted or replayed
}

// Appends lists the events the decision appends: one, a transaction's,
// or none.
func (d *Decision) Appends() []*contract.Event {
	if d.Event != nil {
		return []*contract.Event{d.Event}
	}
	return d.Txn
}

// common is what the rules every single-key family shares (a replay, a
// version check, the event, a plain write's finish, the conflict record)
// read of its command beyond its header. Each family fills it from its
// own fields (its common method); a part the family does not have stays
// zero, as the rules always read it.
type common struct {
	*Header
	// ExpectedVersion is nil for an unconditional write; 0 means the key
	// must not exist.
	ExpectedVersion *int64
	// TTLSeconds is the TTL a write sets (finish, lockWrite).
	TTLSeconds int64
	// Semantics and SpecRef are what the write gives the entry (empty:
	// the entry's).
	Semantics contract.Semantics
	SpecRef   string
	// Digest is the request digest the write's events carry: its
	// command's digest when it has a requestId, else none (nothing can
	// retry a request without one, and the digest is a hash of the whole
	// request: 4 % of the writer's CPU).
	Digest string
	// Attempted is the value a conflict record names the write as
	// attempting (nil: null), and ConflictOp its op as change events
	// name it.
	Attempted  json.RawMessage
	ConflictOp contract.Op
}

// write is a single-key write as it is decided: what its rules share of
// its command, its key's state and what a read sees of it at env.Now.
type write struct {
	c       common
	cur     keystate.State
	visible *contract.Entry
	env     *Env
	// states holds the other keys the batch read for the write (a
	// session's, the keys attached to a session it ends).
	states map[string]keystate.State
}

// newWrite is the write of a command whose common part is c on its
// key's state cur.
func newWrite(cur keystate.State, c common, env *Env) write {
	return write{c: c, cur: cur, visible: cur.Visible(env.Now), env: env}
}

// decideKV decides a KV write c on its key's state (in.State) and what
// in.Known holds of its requestId: a denied write is only recorded
// (deniedDecision); any other is decideRequestID, then kvWrite. It is
// pure.
func decideKV(c *KV, in Input, env Env) Decision {
	w := newWrite(in.State, c.common(), &env)
	w.states = in.States
	if !c.Denied {
		if d, ok := decideRequestID(w, in.Known); ok {
			return d
		}
	}
	return kvWrite(w, c)
}

// kvWrite applies the write rules to c given the key's current state
// (the key's latest write is all it knows of requestIds: decideKV
// consults older ones first, a transaction its own). It is pure:
// w.env.Now is the decision time and w.env.Epoch the writer's fencing
// epoch.
func kvWrite(w write, c *KV) Decision {
	visible := w.visible
	key := c.Key.String()
	if c.Denied {
		return deniedDecision(w)
	}
	if c.Op == contract.OpExpire {
		return decideExpire(w)
	}
	if c.Op.LockAction() != "" { // a Lock command's: a KV command holds a lock op only denied
		return Decision{Err: contract.Errorf(contract.EInternal, "%s is not a KV write", c.Op)}
	}
	if contract.ServerPurpose(c.Semantics.Purpose) {
		return Decision{Err: errLockPurpose(c.Semantics.Purpose)}
	}
	if d, done := replayOrMismatch(w); done {
		return d
	}
	if err := guardLock(visible, c); err != nil {
		return Decision{Err: err}
	}
	if err := guardCollection(visible, c.Op); err != nil {
		return Decision{Err: err}
	}
	if err := guardSession(visible, c.Op); err != nil {
		return Decision{Err: err}
	}
	ev := newEvent(w)
	switch c.Op {
	case contract.OpDelete:
		if visible == nil {
			return Decision{Err: contract.FieldErrorf(contract.ENotFound, "key", "key %s does not exist", key)}
		}
		d := removal(ev, visible, contract.OpDelete)
		if visible.Semantics.Purpose == contract.PurposeSession {
			return endSession(w, d, contract.SessionDeleted)
		}
		return d
	case contract.OpSessionCreate:
		return decideSessionCreate(w, c, ev)
	case contract.OpSessionKeepAlive:
		return decideKeepAlive(w, ev)
	case contract.OpSessionRevoke:
		return decideRevoke(w, ev)
	case contract.OpIncrement:
		return decideIncrement(w, c, ev)
	case contract.OpPatch:
		return decidePatch(w, c, ev)
	case contract.OpTouch:
		return decideTouch(w, ev)
	}
	ev.After = c.Value
	switch {
	case c.ExpectedVersion == nil:
		ev.Op = contract.OpSet
	case *c.ExpectedVersion == 0:
		ev.Op = contract.OpCreate
	default:
		ev.Op = contract.OpCAS
	}
	d := finish(w, ev, "other", c.KeepTTL)
	if c.Session != "" {
		return attach(w, d, c.Session, "", ev.Version)
	}
	return d
}

// replayOrMismatch decides w when it repeats the key's latest write (a
// replay, or request_id_reused under another body) or names a version
// the key is not at (version_mismatch); done is false otherwise. Every
// single-key write but expire and a denial asks it first.
func replayOrMismatch(w write) (d Decision, done bool) {
	cur, visible, r := w.cur, w.visible, w.c
	switch requestSeen(cur, r.RequestID, r.Digest) {
	case seenSame:
		res := Result{Entry: cur.Entry, Replayed: true}
		if !cur.Live {
			res.Entry = contract.Entry{Key: r.Key.String(), Version: cur.Version}
		}
		return Decision{Result: res}, true
	case seenOther:
		return conflictDecision(w, "request_id_reused",
			"requestId %q was already used for a different write of this key", r.RequestID), true
	}
	var current int64
	if visible != nil {
		current = cur.Version
	}
	if r.ExpectedVersion != nil && *r.ExpectedVersion != current {
		return conflictDecision(w, "version_mismatch",
			"expected version %d, current version is %d", *r.ExpectedVersion, current), true
	}
	return d, false
}

// seen is what a key's state remembers of a requestId.
type seen int

const (
	seenNone  seen = iota // not a request id the key remembers
	seenSame              // the same request (requestId and digest): a replay
	seenOther             // a different request under the same requestId: reused
)

// requestSeen is the one place a write's requestId is compared with what
// its key remembers: replayOrMismatch (one key) and decideTxn (every key a
// transaction writes) ask it. Today a key remembers its latest write's
// requestId and digest; a window of older ones extends this function
// (and keystate.State) alone.
func requestSeen(cur keystate.State, requestID, digest string) seen {
	switch {
	case requestID == "" || cur.Version == 0 || cur.Entry.RequestID != requestID:
		return seenNone
	case cur.RequestDigest == digest:
		return seenSame
	}
	return seenOther
}

// isLockPurpose reports whether entries of purpose are written only by
// the lock or leader ops.
func isLockPurpose(purpose string) bool {
	return purpose == contract.PurposeLock || purpose == contract.PurposeLeader
}

// errLockPurpose refuses a plain write that names a lock's or a
// collection's purpose: lock and leader values, their fencing tokens, and
// collections' metadata are the server's.
func errLockPurpose(purpose string) *contract.Error {
	return contract.FieldErrorf(contract.EInvalid, "semantics.purpose",
		"purpose %s is written only by the %s operations", purpose, purpose)
}

// finish completes a plain write of ev.After (put, increment, patch):
// semantics and specRef are the entry's unless w gives new ones (a new
// key gets purpose fallback; a broken lock or leadership gets other).
// With keep the entry keeps its expiry; otherwise w.c.TTLSeconds sets it
// (0: none).
func finish(w write, ev *contract.Event, fallback string, keep bool) Decision {
	visible, r, now := w.visible, w.c, w.env.Now
	ev.Semantics = r.Semantics
	if ev.Semantics.Purpose == "" {
		ev.Semantics = contract.Semantics{Purpose: fallback}
		if visible != nil && !isLockPurpose(visible.Semantics.Purpose) {
			ev.Semantics = visible.Semantics
		} else if visible != nil {
			ev.Semantics.Purpose = "other"
		}
	}
	if ev.SpecRef == "" && visible != nil {
		ev.SpecRef = visible.SpecRef
	}
	if !keep || visible == nil || visible.ExpiresAt == nil {
		return put(ev, visible, r.TTLSeconds, now)
	}
	d := put(ev, visible, 0, now)
	ev.ExpiresAt = visible.ExpiresAt
	ev.Semantics.TTLSeconds = visible.Semantics.TTLSeconds
	d.Result.Entry = ev.Entry()
	return d
}

// newEvent returns the event w would append after cur, to be completed
// by the op.
func newEvent(w write) *contract.Event {
	cur, r := w.cur, w.c
	ev := &contract.Event{
		SchemaVersion: contract.SchemaVersion,
		Key:           r.Key.String(),
		Scope:         r.Key.Scope(),
		Version:       cur.Version + 1,
		PrevVersion:   cur.Version,
		Before:        json.RawMessage("null"),
		After:         json.RawMessage("null"),
		RequestID:     r.RequestID,
		RequestDigest: r.Digest,
		Principal:     r.Principal,
		SpecRef:       r.SpecRef,
		TS:            w.env.Now,
		WriterEpoch:   w.env.Epoch,
	}
	if cur.Live {
		ev.Before = cur.Entry.Value
	}
	return ev
}

// put completes ev as a put of ev.After with ev.Semantics: the entry keeps
// its creation time, and ttl (> 0) sets its expiry from now; with ttl 0
// the entry has no expiry.
func put(ev *contract.Event, visible *contract.Entry, ttl int64, now time.Time) Decision {
	ev.Kind = contract.KindPut
	ev.CreatedAt = now
	if visible != nil {
		ev.CreatedAt = visible.CreatedAt
	}
	ev.Semantics.TTLSeconds = ttl
	if ttl > 0 {
		exp := now.Add(time.Duration(ttl) * time.Second)
		ev.ExpiresAt = &exp
	}
	return Decision{Event: ev, Result: Result{Entry: ev.Entry()}}
}

// removal completes ev as a delete of the visible entry by op.
func removal(ev *contract.Event, visible *contract.Entry, op contract.Op) Decision {
	ev.Kind, ev.Op = contract.KindDelete, op
	ev.CreatedAt = visible.CreatedAt
	ev.Semantics = visible.Semantics
	if ev.SpecRef == "" {
		ev.SpecRef = visible.SpecRef
	}
	return Decision{Event: ev, Result: Result{Entry: contract.Entry{Key: ev.Key, Version: ev.Version}}}
}

// ErrNotExpired answers an expire that lost to a renewal, a delete or an
// earlier expire: nothing is written.
var ErrNotExpired = contract.Errorf(contract.EConflict, "the entry is no longer the expired version")

// decideExpire removes the key when it still holds the expired version
// the sweeper saw: a compare-and-swap, so a renewal that won the race is
// kept. The event carries the entry's semantics and value, for the audit
// trail.
func decideExpire(w write) Decision {
	cur, r, now := w.cur, w.c, w.env.Now
	if !cur.Live || r.ExpectedVersion == nil || cur.Version != *r.ExpectedVersion || !cur.Entry.Expired(now) {
		return Decision{Err: ErrNotExpired}
	}
	e := cur.Entry
	ev := newEvent(w)
	ev.RequestID, ev.RequestDigest = "", ""
	d := removal(ev, &e, contract.OpExpire)
	ev.Kind = contract.KindExpire
	ev.ExpiresAt = e.ExpiresAt
	if e.Semantics.Purpose == contract.PurposeSession {
		return endSession(w, d, contract.SessionExpired)
	}
	return d
}

// conflictDecision refuses w with a conflict (reason, the message of
// format and args) recorded in kv.conflicts under the 409's correlation
// id.
func conflictDecision(w write, reason, format string, args ...any) Decision {
	cur, visible, r, now := w.cur, w.visible, w.c, w.env.Now
	var current int64
	currentValue := json.RawMessage("null")
	if visible != nil {
		current = cur.Version
		currentValue = visible.Value
	}
	var expected int64 = -1
	if r.ExpectedVersion != nil {
		expected = *r.ExpectedVersion
	}
	id := w.env.NewID()
	err := contract.FieldErrorf(contract.EConflict, "expectedVersion", format, args...)
	switch reason {
	case "request_id_reused", "stale_request":
		err.Field = "requestId"
	case "field_mismatch":
		err.Code, err.Field = contract.EFieldMismatch, "if.equals"
	}
	err.Current = visible
	err.CorrelationID = id
	attempted := r.Attempted
	if attempted == nil {
		attempted = json.RawMessage("null")
	}
	// A conflict counts against the key's purpose; the request's only
	// when the key is absent.
	sem := r.Semantics
	if visible != nil {
		sem = visible.Semantics
	}
	if sem.Purpose == "" {
		sem.Purpose = "other"
	}
	return Decision{
		Err: err,
		Conflict: &Conflict{
			SchemaVersion:   contract.SchemaVersion,
			ID:              id,
			Key:             r.Key.String(),
			Scope:           r.Key.Scope(),
			Op:              r.ConflictOp,
			ExpectedVersion: expected,
			CurrentVersion:  current,
			Attempted:       attempted,
			Current:         currentValue,
			Semantics:       sem,
			SpecRef:         r.SpecRef,
			RequestID:       r.RequestID,
			Principal:       r.Principal,
			TS:              now,
			Reason:          reason,
		},
	}
}

// deniedDecision records a denied write in kv.conflicts, reason
// forbidden: key, scope, the request's op, principal and requestId, and
// the key's purpose (other when absent) so denials can be told apart per
// purpose. No value, attempted or current, and no version: the denial
// reveals nothing of the entry. Nothing is appended and nobody waits for
// the answer.
func deniedDecision(w write) Decision {
	visible, r, now := w.visible, w.c, w.env.Now
	purpose := "other"
	if visible != nil && visible.Semantics.Purpose != "" {
		purpose = visible.Semantics.Purpose
	}
	return Decision{Conflict: &Conflict{
		SchemaVersion:   contract.SchemaVersion,
		ID:              w.env.NewID(),
		Key:             r.Key.String(),
		Scope:           r.Key.Scope(),
		Op:              r.Op,
		ExpectedVersion: -1,
		Attempted:       json.RawMessage("null"),
		Current:         json.RawMessage("null"),
		Semantics:       contract.Semantics{Purpose: purpose},
		RequestID:       r.RequestID,
		Principal:       r.Principal,
		TS:              now,
		Reason:          ReasonForbidden,
	}}
}

// common is what the rules every single-key family shares read of c. A
// conflict names a put as set and a patch with if as field_cas (as
// change events do), and a patch's changes as what it attempted.
func (c *KV) common() common {
	cm := common{Header: &c.Header, ExpectedVersion: c.ExpectedVersion, TTLSeconds: c.TTLSeconds,
		Semantics: c.Semantics, SpecRef: c.SpecRef, Attempted: c.Value, ConflictOp: c.Op}
	switch {
	case c.Op == contract.OpPut:
		cm.ConflictOp = contract.OpSet
	case c.Op == contract.OpPatch && c.If != nil:
		cm.ConflictOp = contract.OpFieldCAS
	}
	if c.Op == contract.OpPatch {
		cm.Attempted, _ = marshalCompact(map[string]any{"set": c.Set, "unset": c.Unset, "if": untaggedIf(c.If)})
	}
	if c.RequestID != "" && !c.Denied { // a denial is only recorded: no event carries its digest
		cm.Digest = c.digest()
	}
	return cm
}

// digest is c's request digest (requestid.go): its head, semantics,
// specRef and principal; keepTtl when set; unless it is a put or a
// delete, an increment's addend and create, a patch's set, unset and if
// (untagged), no holder, and its op's purpose; an increment's bounds
// when given. A denied write is a KV command of any op: an ltrim's or a
// queue write's keeps the (zero) parts of its family.
func (c *KV) digest() string {
	parts := headParts(&c.Header, c.Value, c.ExpectedVersion, c.TTLSeconds)
	parts = append(parts, c.Semantics, c.SpecRef, c.Principal)
	if c.KeepTTL {
		parts = append(parts, "keepTtl")
	}
	if c.Op != contract.OpPut && c.Op != contract.OpDelete {
		parts = append(parts, c.By, c.Create, c.Set, c.Unset, untaggedIf(c.If), "", c.Op.Purpose())
	}
	// Bounds joined later: appended only when given, so the digest of an
	// unbounded increment is the one it always had.
	if c.Min != nil || c.Max != nil {
		parts = append(parts, "bounds", c.Min, c.Max)
	}
	if c.Op == contract.OpLTrim {
		parts = append(parts, "range", int64(0), int64(0))
	}
	if c.Session != "" {
		parts = append(parts, "session", c.Session)
	}
	if c.Op.IsQueueWrite() {
		parts = append(parts, "queue", int64(0), "", int64(0), "", int64(0))
	}
	return digestSum(parts)
}
