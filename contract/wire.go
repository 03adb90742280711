package contract

import (
	"encoding/json"
	"time"
)

// The request bodies and answers of the HTTP API (schemas/openapi.yaml).
// The server decodes and encodes them, the Go client encodes and decodes
// the same types. A request's Validate checks everything but its JSON
// values, whose size limit is the server's setting (CompactValue).

// PutBody is the body of PUT /v1/kv/{key}.
type PutBody struct {
	Value           json.RawMessage `json:"value"`
	ExpectedVersion *int64          `json:"expectedVersion,omitempty"`
	TTLSeconds      *int64          `json:"ttlSeconds,omitempty"`
	// KeepTTL keeps the entry's expiry when no TTL is given (Redis SET
	// KEEPTTL); without it a put without a TTL leaves the entry without
	// expiry.
	KeepTTL   bool       `json:"keepTtl,omitempty"`
	Semantics *Semantics `json:"semantics,omitempty"`
	RequestID string     `json:"requestId,omitempty"`
	SpecRef   string     `json:"specRef,omitempty"`
	// Session attaches the key to the session at that key of the same
	// project (session.go): the entry has no expiry of its own, and the
	// session's end deletes it.
	Session string `json:"session,omitempty"`
}

// Validate checks the body's fields but the value.
func (b *PutBody) Validate() error {
	if err := checkCommon(b.ExpectedVersion, b.RequestID, b.SpecRef); err != nil {
		return err
	}
	if err := checkSession(b.Session); err != nil {
		return err
	}
	if b.Session != "" && (b.TTLSeconds != nil || b.KeepTTL || (b.Semantics != nil && b.Semantics.TTLSeconds != 0)) {
		return FieldErrorf(EInvalid, "session", "a key attached to a session lives as long as the session: give a session or a TTL, not both")
	}
	if err := checkPlainPurpose(b.Semantics); err != nil {
		return err
	}
	sem := optionalSemantics(b.Semantics).withDefaults()
	if err := sem.validate(); err != nil {
		return err
	}
	ttl := b.TTLSeconds
	if ttl == nil && sem.TTLSeconds != 0 {
		ttl = &sem.TTLSeconds
	}
	if ttl == nil {
		return nil
	}
	if *ttl < 1 || *ttl > MaxTTLSeconds {
		return FieldErrorf(EInvalid, "ttlSeconds", "ttlSeconds must be between 1 and %d (omit it for no expiry)", MaxTTLSeconds)
	}
	if b.KeepTTL {
		return FieldErrorf(EInvalid, "keepTtl", "keepTtl keeps the entry's expiry: give it or a TTL, not both")
	}
	if b.TTLSeconds != nil && sem.TTLSeconds != 0 && sem.TTLSeconds != *b.TTLSeconds {
		return FieldErrorf(EInvalid, "semantics.ttlSeconds", "semantics.ttlSeconds differs from ttlSeconds")
	}
	return nil
}

// EntrySemantics are the semantics the request gives the entry: the
// request's with purpose other by default, or none (the zero value) when
// the body has no semantics: the entry keeps its own (a new key gets
// purpose other).
func (b *PutBody) EntrySemantics() Semantics { return optionalSemantics(b.Semantics) }

// TTL is the entry's TTL in seconds, from ttlSeconds or
// semantics.ttlSeconds; 0 for none (or, with KeepTTL, the entry's
// expiry).
func (b *PutBody) TTL() int64 { return optionalTTL(b.Semantics, b.TTLSeconds) }

// Idempotent reports whether the request is safe to repeat: the server
// answers a repeat of a write with a requestId as a replay.
func (b *PutBody) Idempotent() bool { return b.RequestID != "" }

// DeleteParams are the query parameters of DELETE /v1/kv/{key}.
type DeleteParams struct {
	// ExpectedVersion, when set, is the version the key must have now.
	ExpectedVersion *int64
	// RequestID makes the delete idempotent (and retried).
	RequestID string
}

// Validate checks the parameters.
func (p *DeleteParams) Validate() error { return checkCommon(p.ExpectedVersion, p.RequestID, "") }

// WriteOptions are the members an increment and a patch share: whether a
// missing key is created, the version guard, the entry's new TTL and
// semantics (none keeps the entry's), and the request's id and spec.
type WriteOptions struct {
	// Create starts a missing (or expired, or deleted) key: a counter
	// from 0, an object from {}.
	Create          bool   `json:"create,omitempty"`
	ExpectedVersion *int64 `json:"expectedVersion,omitempty"`
	// TTLSeconds, when set, expires the entry this long after the write;
	// none keeps its expiry.
	TTLSeconds *int64     `json:"ttlSeconds,omitempty"`
	Semantics  *Semantics `json:"semantics,omitempty"`
	RequestID  string     `json:"requestId,omitempty"`
	SpecRef    string     `json:"specRef,omitempty"`
}

// validate checks the options.
func (o *WriteOptions) validate() error {
	if err := checkCommon(o.ExpectedVersion, o.RequestID, o.SpecRef); err != nil {
		return err
	}
	return checkOptional(o.Semantics, o.TTLSeconds)
}

// EntrySemantics are the semantics the request gives the entry; the zero
// value keeps the entry's.
func (o *WriteOptions) EntrySemantics() Semantics { return optionalSemantics(o.Semantics) }

// TTL is the entry's new TTL in seconds; 0 keeps its expiry.
func (o *WriteOptions) TTL() int64 { return optionalTTL(o.Semantics, o.TTLSeconds) }

// Idempotent: see PutBody.Idempotent.
func (o *WriteOptions) Idempotent() bool { return o.RequestID != "" }

// IncrementBody is the body of POST /v1/kv/{key}:increment.
type IncrementBody struct {
	By *int64 `json:"by,omitempty"`
	// Min and Max, when set, bound the result: an increment whose result
	// would be below Min or above Max changes nothing and fails with
	// out_of_range (field min or max). The server decides it with the
	// increment, in one request: a rate limit is a decrement with min 0.
	// They are the increment's own, not WriteOptions: a patch has no
	// number to bound.
	Min *int64 `json:"min,omitempty"`
	Max *int64 `json:"max,omitempty"`
	WriteOptions
}

// Validate checks the body.
func (b *IncrementBody) Validate() error {
	if b.By != nil && *b.By == 0 {
		return FieldErrorf(EInvalid, "by", "by must not be 0 (read the key with GET)")
	}
	if b.Min != nil && b.Max != nil && *b.Min > *b.Max {
		return FieldErrorf(EInvalid, "max", "max %d is below min %d: no result could satisfy both", *b.Max, *b.Min)
	}
	return b.validate()
}

// Step is the amount to add: by, or 1.
func (b *IncrementBody) Step() int64 {
	if b.By == nil {
		return 1
	}
	return *b.By
}

// checkOptional checks the semantics and TTL of an op that keeps the
// entry's own when the request gives none (increment, patch).
func checkOptional(sem *Semantics, ttl *int64) error {
	if err := checkPlainPurpose(sem); err != nil {
		return err
	}
	if sem != nil {
		if err := sem.validate(); err != nil {
			return err
		}
	}
	if ttl == nil {
		return nil
	}
	if *ttl < 1 || *ttl > MaxTTLSeconds {
		return FieldErrorf(EInvalid, "ttlSeconds", "ttlSeconds must be between 1 and %d (omit it to keep the entry's expiry)", MaxTTLSeconds)
	}
	if sem != nil && sem.TTLSeconds != 0 && sem.TTLSeconds != *ttl {
		return FieldErrorf(EInvalid, "semantics.ttlSeconds", "semantics.ttlSeconds differs from ttlSeconds")
	}
	return nil
}

// checkPlainPurpose refuses the purposes of lock, leader and collection
// entries on a plain write (put, increment, patch): only their own ops
// write those entries, their values, fencing tokens and metadata.
func checkPlainPurpose(sem *Semantics) error {
	if sem != nil && ServerPurpose(sem.Purpose) {
		return FieldErrorf(EInvalid, "semantics.purpose", "purpose %s is written only by the %s operations", sem.Purpose, sem.Purpose)
	}
	return nil
}

// TouchBody is the body of POST /v1/kv/{key}:touch: a new expiry for an
// existing entry (Redis EXPIRE, or PERSIST with Persist), its value,
// semantics (but ttlSeconds) and specRef kept byte for byte. Exactly one
// of TTLSeconds and Persist is given.
type TouchBody struct {
	// TTLSeconds expires the entry this long after the touch.
	TTLSeconds *int64 `json:"ttlSeconds,omitempty"`
	// Persist removes the entry's expiry.
	Persist bool `json:"persist,omitempty"`
	// ExpectedVersion, when set, is the version the key must be at: a
	// touch never creates a key, so it is positive.
	ExpectedVersion *int64 `json:"expectedVersion,omitempty"`
	RequestID       string `json:"requestId,omitempty"`
}

// Validate checks the body.
func (b *TouchBody) Validate() error {
	if err := checkCommon(b.ExpectedVersion, b.RequestID, ""); err != nil {
		return err
	}
	switch {
	case b.ExpectedVersion != nil && *b.ExpectedVersion == 0:
		return FieldErrorf(EInvalid, "expectedVersion", "expectedVersion must be a positive version: a touch never creates a key")
	case b.Persist && b.TTLSeconds != nil:
		return FieldErrorf(EInvalid, "persist", "persist removes the expiry: give it or ttlSeconds, not both")
	case b.Persist:
		return nil
	case b.TTLSeconds == nil:
		return FieldErrorf(EInvalid, "ttlSeconds", "a touch needs ttlSeconds (the new expiry) or persist (no expiry)")
	case *b.TTLSeconds < 1 || *b.TTLSeconds > MaxTTLSeconds:
		return FieldErrorf(EInvalid, "ttlSeconds", "ttlSeconds must be between 1 and %d (persist removes the expiry)", MaxTTLSeconds)
	}
	return nil
}

// TTL is the entry's new TTL in seconds; 0 for Persist (no expiry).
func (b *TouchBody) TTL() int64 {
	if b.TTLSeconds == nil {
		return 0
	}
	return *b.TTLSeconds
}

// Idempotent: see PutBody.Idempotent.
func (b *TouchBody) Idempotent() bool { return b.RequestID != "" }

// optionalSemantics are the semantics an increment or patch gives the
// entry: none (the zero value: keep the entry's), or the request's with
// purpose other by default.
func optionalSemantics(sem *Semantics) Semantics {
	if sem == nil {
		return Semantics{}
	}
	return sem.withDefaults()
}

// optionalTTL is the new TTL an increment or patch gives the entry (0:
// keep its expiry).
func optionalTTL(sem *Semantics, ttl *int64) int64 {
	if ttl != nil {
		return *ttl
	}
	return optionalSemantics(sem).TTLSeconds
}

// FieldCondition guards a patch (PatchBody.If): the top-level field must
// equal Equals (compared as canonical JSON; a missing field equals null).
type FieldCondition struct {
	Field  string          `json:"field"`
	Equals json.RawMessage `json:"equals"`
}

// PatchBody is the body of PATCH /v1/kv/{key}.
type PatchBody struct {
	Set   map[string]json.RawMessage `json:"set,omitempty"`
	Unset []string                   `json:"unset,omitempty"`
	If    *FieldCondition            `json:"if,omitempty"`
	WriteOptions
}

// Validate checks the body but the JSON values of set and if.equals.
func (b *PatchBody) Validate() error {
	if len(b.Set) == 0 && len(b.Unset) == 0 {
		return FieldErrorf(EInvalid, "set", "a patch needs fields to set or unset")
	}
	if len(b.Set)+len(b.Unset) > MaxPatchFields {
		return FieldErrorf(EInvalid, "set", "a patch changes at most %d fields", MaxPatchFields)
	}
	for f := range b.Set {
		if err := ValidateFieldName("set", f); err != nil {
			return err
		}
	}
	for _, f := range b.Unset {
		if err := ValidateFieldName("unset", f); err != nil {
			return err
		}
		if _, ok := b.Set[f]; ok {
			return FieldErrorf(EInvalid, "unset", "field %q is both set and unset", f)
		}
	}
	if b.If != nil {
		if err := ValidateFieldName("if.field", b.If.Field); err != nil {
			return err
		}
		if b.If.Equals == nil {
			return FieldErrorf(EInvalid, "if.equals", "if.equals is required (null matches a missing field)")
		}
	}
	return b.validate()
}

// LockBody is the body of the lock and leader verbs: acquire, extend,
// release, elect, heartbeat, resign.
type LockBody struct {
	Holder     string     `json:"holder"`
	TTLSeconds *int64     `json:"ttlSeconds,omitempty"`
	Semantics  *Semantics `json:"semantics,omitempty"`
	RequestID  string     `json:"requestId,omitempty"`
	SpecRef    string     `json:"specRef,omitempty"`
	// Session attaches an acquired lock or leadership to the session at
	// that key of the same project (acquire and elect only): it has no
	// lease of its own, and the session's end releases it.
	Session string `json:"session,omitempty"`
}

// ValidateFor checks the body of op, a lock-shaped write.
func (b *LockBody) ValidateFor(op Op) error {
	if b.Holder == "" {
		return FieldErrorf(EInvalid, "holder", "holder is required: the id of the process taking part (for example host/pid or a UUID)")
	}
	if len(b.Holder) > MaxHolderLen {
		return FieldErrorf(EInvalid, "holder", "holder is longer than %d characters", MaxHolderLen)
	}
	if err := checkText("holder", b.Holder); err != nil {
		return err
	}
	if err := checkCommon(nil, b.RequestID, b.SpecRef); err != nil {
		return err
	}
	if err := checkSession(b.Session); err != nil {
		return err
	}
	if b.Session != "" && op.LockAction() != LockAcquire {
		return FieldErrorf(EInvalid, "session", "only acquire (a lock) and elect (a leadership) attach to a session")
	}
	if b.Session != "" && b.TTLSeconds != nil {
		return FieldErrorf(EInvalid, "session", "a %s attached to a session lasts as long as the session: give a session or ttlSeconds, not both", op.Purpose())
	}
	if op.LockAction() == LockRelease {
		if b.TTLSeconds != nil {
			return FieldErrorf(EInvalid, "ttlSeconds", "%s takes only holder, requestId and specRef", op.Verb())
		}
		if b.Semantics != nil {
			return FieldErrorf(EInvalid, "semantics", "%s takes only holder, requestId and specRef", op.Verb())
		}
		return nil
	}
	if b.TTLSeconds != nil && (*b.TTLSeconds < 1 || *b.TTLSeconds > MaxTTLSeconds) {
		return FieldErrorf(EInvalid, "ttlSeconds", "ttlSeconds (the lease) must be between 1 and %d", MaxTTLSeconds)
	}
	if sem := b.Semantics; sem != nil {
		role := op.Purpose()
		if sem.Purpose != "" && sem.Purpose != role {
			return FieldErrorf(EInvalid, "semantics.purpose", "a %s's purpose is %s", role, role)
		}
		if sem.TTLSeconds != 0 {
			return FieldErrorf(EInvalid, "semantics.ttlSeconds", "give the lease as ttlSeconds")
		}
		return b.EntrySemantics(op).validate()
	}
	return nil
}

// EntrySemantics are the semantics op gives the entry: the request's with
// the op's purpose, or none (the writer keeps the entry's).
func (b *LockBody) EntrySemantics(op Op) Semantics {
	if b.Semantics == nil || op.LockAction() == LockRelease {
		return Semantics{}
	}
	s := *b.Semantics
	s.Purpose = op.Purpose()
	return s
}

// Lease is the lease in seconds: ttlSeconds, or DefaultLockTTLSeconds.
func (b *LockBody) Lease() int64 {
	if b.TTLSeconds == nil {
		return DefaultLockTTLSeconds
	}
	return *b.TTLSeconds
}

// Idempotent: see PutBody.Idempotent.
func (b *LockBody) Idempotent() bool { return b.RequestID != "" }

// DeleteAnswer is the answer of DELETE /v1/kv/{key}.
type DeleteAnswer struct {
	Key string `json:"key"`
	// Version is the delete's own version: the key's next one.
	Version int64 `json:"version"`
	Deleted bool  `json:"deleted"`
	// Replayed is the answer's Eskv-Replayed header: the request repeated
	// the key's last write (same requestId and body), so nothing new was
	// written.
	Replayed bool `json:"-"`
}

// ListAnswer is the answer of GET /v1/kv: one page of a listing.
type ListAnswer struct {
	// Items are live entries in bytewise key order.
	Items []Entry `json:"items"`
	Count int     `json:"count"`
	// Truncated says more entries follow: ask again with cursor set to
	// NextCursor.
	Truncated  bool   `json:"truncated"`
	NextCursor string `json:"nextCursor,omitempty"`
	// Position is the log position the page reflects (a watch cursor,
	// p<partition>.o<offset>): every event of the prefix's partition up
	// to it and none after, so watching the prefix after it delivers
	// exactly the later changes. Every page of one listing (NextCursor
	// carries it) answers as of the first page's position: the pages
	// together are one snapshot.
	Position string `json:"position,omitempty"`
}

// LockAnswer describes a held lock or leadership.
type LockAnswer struct {
	Key    string `json:"key"`
	Holder string `json:"holder"`
	// Token is the fencing token: the entry's version when Holder's
	// tenure began. It grows strictly from tenure to tenure and is the
	// same for one holder's whole tenure (re-entry and extends keep it):
	// pass it to the resources the lock protects and have them refuse
	// any token lower than the highest they have seen.
	Token      int64      `json:"token"`
	Version    int64      `json:"version"`
	AcquiredAt time.Time  `json:"acquiredAt"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	// Reentered is true when the holder already held it (the tenure and
	// its token go on; the lease was renewed).
	Reentered bool `json:"reentered"`
	// Replayed: see DeleteAnswer.Replayed.
	Replayed bool `json:"-"`
}

// ReleaseAnswer is the answer of release and resign.
type ReleaseAnswer struct {
	Key      string `json:"key"`
	Version  int64  `json:"version"`
	Released bool   `json:"released"`
	// Replayed: see DeleteAnswer.Replayed.
	Replayed bool `json:"-"`
}

// FieldAnswer is the answer of GET /v1/kv/{key}?field=NAME: one top-level
// field of an object value.
type FieldAnswer struct {
	Key     string          `json:"key"`
	Version int64           `json:"version"`
	Field   string          `json:"field"`
	Value   json.RawMessage `json:"value"`
}

// CounterAnswer is the answer of GET /v1/kv/{key}:counter: the integer
// value of a counter.
type CounterAnswer struct {
	Key     string `json:"key"`
	Value   int64  `json:"value"`
	Version int64  `json:"version"`
}
