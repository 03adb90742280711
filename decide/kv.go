package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/eskv/eskv/contract"
)

// request is a write as the rules read it: every op family's fields,
// flattened from its command (Command.flat), so that the digest of a
// write is the one it always had whatever its family.
type request struct {
	Key contract.Key
	// Op is a write: put, delete, expire, increment, patch, or a lock or
	// leader op.
	Op contract.Op
	// Value is the compact JSON of a put.
	Value json.RawMessage
	// ExpectedVersion is nil for an unconditional write; 0 means the key
	// must not exist. For contract.OpExpire it is the version to expire.
	ExpectedVersion *int64
	// TTLSeconds: for put, the entry's TTL (0: none, unless KeepTTL); for
	// increment and patch, a new TTL when > 0 (0 keeps the entry's
	// expiry); for locks, the lease.
	TTLSeconds int64
	// KeepTTL makes a put without TTLSeconds keep the entry's expiry (as
	// Redis SET KEEPTTL does); without it a put's expiry is its own.
	KeepTTL bool
	// Semantics the write gives the entry; an empty Purpose keeps the
	// entry's (a plain write over a lock or leadership that breaks it
	// gets purpose other). Lock ops force the purpose to theirs, and only
	// they may write purpose lock or leader.
	Semantics contract.Semantics
	// SpecRef, when empty, keeps the entry's.
	SpecRef   string
	RequestID string
	Principal string

	// By is the increment's addend; Create lets increment and patch create
	// a missing key (from 0 and {}).
	By     int64
	Create bool
	// Min and Max, when set, bound an increment's Result: outside them
	// the increment is refused with out_of_range (field min or max).
	Min, Max *int64
	// Set and Unset are a patch's top-level field changes (Unset first);
	// If, when set, makes the patch a field compare-and-swap.
	Set   map[string]json.RawMessage
	Unset []string
	If    *contract.FieldCondition
	// MaxValueBytes bounds the value an increment or patch produces
	// (0: unbounded).
	MaxValueBytes int

	// Holder identifies the lock or leader-pool caller.
	Holder string

	// Member is the member an sadd or srem adds or removes (decideSet).
	Member string
	// Start and Stop are an ltrim's range (decideList); a push's value
	// is Value.
	Start, Stop int64

	// Queue writes (decideQueue): a push's Priority and DedupID (its
	// data is Value), a pop's Visibility timeout in seconds (0: remove
	// at once), and the item and delivery an ack's receipt (or the
	// sweeper's requeue or expire) names. ItemTTL is a push's item TTL
	// in seconds (0: the item never expires; TTLSeconds is the queue's).
	Priority   int64
	DedupID    string
	Visibility int64
	Item       string
	Delivery   int64
	ItemTTL    int64
	// ReceiptNonce is the random part of an ack's receipt ("" for a
	// receipt of a delivery popped before receipts had one).
	ReceiptNonce string

	// Blind marks a request of a principal that may write its key but
	// not read it (set by the API; a transaction's steps each carry
	// their own). CheckBlind refuses what such a request may not ask (a
	// condition on the value); a blind sadd, srem or ltrim that changes
	// nothing still appends, so that its version tells nothing of the
	// collection (decideSet, decideList).
	Blind bool

	// Denied marks a write the API refused (403 forbidden) before the
	// writer saw it: decideWrite only records it in kv.conflicts with reason
	// forbidden, without any value, and appends nothing (AuditDenied).
	Denied bool

	// Txn, when set, makes the request a multi-key transaction (Op
	// contract.OpTxn): its steps are decided in order, all or none
	// (decideTxn). Key is then the first step's key: every step's key
	// lies in its scope, so in its partition.
	Txn []txnStep
}

// requestDigest is the digest an event of r carries: Digest when r has a
// requestId, else none (nothing can retry a request without one, and the
// digest is a hash of the whole request: 4 % of the writer's CPU).
func (r *request) requestDigest() string {
	if r.RequestID == "" {
		return ""
	}
	return r.Digest()
}

// Digest identifies the request body, so that a retried requestId can be
// told from a reused one. The principal is part of it: another principal
// reusing a requestId is a different request.
func (r *request) Digest() string {
	if r.Txn != nil {
		return txnDigest(r)
	}
	var ev string
	if r.ExpectedVersion != nil {
		ev = strconv.FormatInt(*r.ExpectedVersion, 10)
	}
	// The parts keep the names and encodings digests were first written
	// with: a lock op by its action and purpose, If untagged.
	kind := string(r.Op)
	if a := r.Op.LockAction(); a != "" {
		kind = string(a)
	}
	parts := []any{kind, r.Key.String(), r.Value, ev, r.TTLSeconds, r.Semantics, r.SpecRef, r.Principal}
	if r.KeepTTL {
		parts = append(parts, "keepTtl")
	}
	if r.Op != contract.OpPut && r.Op != contract.OpDelete {
		parts = append(parts, r.By, r.Create, r.Set, r.Unset, untaggedIf(r.If), r.Holder, r.Op.Purpose())
	}
	// Bounds joined later: appended only when given, so the digest of an
	// unbounded increment is the one it always had.
	if r.Min != nil || r.Max != nil {
		parts = append(parts, "bounds", r.Min, r.Max)
	}
	if r.Member != "" { // only then: older digests keep their parts
		parts = append(parts, "member", r.Member)
	}
	if r.Op == contract.OpLTrim {
		parts = append(parts, "range", r.Start, r.Stop)
	}
	if r.Op.IsQueueWrite() {
		parts = append(parts, "queue", r.Priority, r.DedupID, r.Visibility, r.Item, r.Delivery)
	}
	if r.ItemTTL != 0 { // only then: older digests keep their parts
		parts = append(parts, "itemTtl", r.ItemTTL)
	}
	if r.ReceiptNonce != "" { // only then: older digests keep their parts
		parts = append(parts, "nonce", r.ReceiptNonce)
	}
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

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
}

// Decision is what a command concluded.
type Decision struct {
	Event    *contract.Event    // to append, when accepted
	Txn      []*contract.Event  // a transaction's events, to append together
	Conflict *contract.Conflict // to record in kv.conflicts, when rejected by CAS
	Err      error              // the answer when not accepted
	Result   Result             // the answer when accepted or replayed
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
	// TTLSeconds is the TTL a write sets (finish, decideLock).
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
	r       *request
	cur     contract.State
	visible *contract.Entry
	env     *Env
}

// newWrite is the write of a command whose common part is c on its
// key's state cur.
func newWrite(cur contract.State, c common, env *Env) write {
	return write{c: c, cur: cur, visible: cur.Visible(env.Now), env: env}
}

func newReqWrite(cur contract.State, r *request, env *Env) write {
	w := newWrite(cur, r.common(), env)
	w.r = r
	return w
}

// decideWrite applies the write rules to a request given the key's current
// state (the key's latest write is all it knows of requestIds: decideKV
// consults older ones first). It is pure: env.Now is the decision time
// and env.Epoch the writer's fencing epoch.
func decideWrite(cur contract.State, r *request, env Env) Decision {
	return newReqWrite(cur, r, &env).decide()
}

func (w write) decide() Decision {
	r, visible := w.r, w.visible
	key := r.Key.String()
	if r.Denied {
		return deniedDecision(w)
	}
	if r.Op == contract.OpExpire {
		return decideExpire(w)
	}
	if r.Op.LockAction() == "" && contract.ServerPurpose(r.Semantics.Purpose) {
		return Decision{Err: errLockPurpose(r.Semantics.Purpose)}
	}
	if d, done := replayOrMismatch(w); done {
		return d
	}

	ev := newEvent(w)
	if r.Op.LockAction() == "" {
		if err := guardLock(visible, r); err != nil {
			return Decision{Err: err}
		}
		if err := guardCollection(visible, r); err != nil {
			return Decision{Err: err}
		}
	} else {
		return Decision{Err: contract.Errorf(contract.EInternal, "%s is a lock op: a Lock command decides it", r.Op)}
	}
	switch r.Op {
	case contract.OpDelete:
		if visible == nil {
			return Decision{Err: contract.FieldErrorf(contract.ENotFound, "key", "key %s does not exist", key)}
		}
		return removal(ev, visible, contract.OpDelete)
	case contract.OpIncrement:
		return decideIncrement(w, ev)
	case contract.OpPatch:
		return decidePatch(w, ev)
	}
	ev.After = r.Value
	switch {
	case r.ExpectedVersion == nil:
		ev.Op = contract.OpSet
	case *r.ExpectedVersion == 0:
		ev.Op = contract.OpCreate
	default:
		ev.Op = contract.OpCAS
	}
	return finish(w, ev, "other", r.KeepTTL)
}

// replayOrMismatch decides r when it repeats the key's latest write (a
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
// its key remembers: decideWrite (one key) and decideTxn (every key a
// transaction writes) ask it. Today a key remembers its latest write's
// requestId and digest; a window of older ones extends this function
// (and contract.State) alone.
func requestSeen(cur contract.State, requestID, digest string) seen {
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
// semantics and specRef are the entry's unless r gives new ones (a new
// key gets purpose fallback; a broken lock or leadership gets other).
// With keep the entry keeps its expiry; otherwise r.TTLSeconds sets it
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

// newEvent returns the event r would append after cur, to be completed
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
		Conflict: &contract.Conflict{
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
	return Decision{Conflict: &contract.Conflict{
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
		Reason:          contract.ReasonForbidden,
	}}
}

// head is the bridge of a request to its header.
func (r *request) head() *Header {
	return &Header{Key: r.Key, Op: r.Op, RequestID: r.RequestID, Principal: r.Principal, Blind: r.Blind}
}

// common is the bridge of a request to what the shared rules read.
func (r *request) common() common {
	c := common{Header: &Header{Key: r.Key, Op: r.Op, RequestID: r.RequestID, Principal: r.Principal, Blind: r.Blind},
		ExpectedVersion: r.ExpectedVersion, TTLSeconds: r.TTLSeconds, Semantics: r.Semantics, SpecRef: r.SpecRef,
		Digest: r.requestDigest(), Attempted: r.Value, ConflictOp: conflictOp(r)}
	if r.Op == contract.OpPatch {
		c.Attempted, _ = marshalCompact(map[string]any{"set": r.Set, "unset": r.Unset, "if": untaggedIf(r.If)})
	}
	return c
}

// conflictOp names a rejected request's op as change events would.
func conflictOp(r *request) contract.Op {
	switch {
	case r.Op == contract.OpPut:
		return contract.OpSet
	case r.Op == contract.OpPatch && r.If != nil:
		return contract.OpFieldCAS
	}
	return r.Op
}
