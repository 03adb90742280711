package contract

import "time"

// Sessions (docs/sessions.md): a session is an entry of purpose session
// at a key its caller names, with a TTL that one call renews
// (keepalive). Keys, locks and leaderships written with the session's
// key (PutBody.Session, LockBody.Session) are attached to it: they have
// no expiry of their own, and when the session ends (revoke, a DELETE of
// its key, or its expiry) the one decision that ends it deletes each
// attached key and releases each attached lock and leadership, in one
// Kafka transaction with the session's own end event. A session lives in
// one project (one partition), the keys attached to it too.
const (
	OpSessionCreate    Op = "session_create"    // POST /v1/kv/{key}:session (kind put)
	OpSessionKeepAlive Op = "session_keepalive" // POST /v1/kv/{key}:keepalive (kind put)
	OpSessionRevoke    Op = "session_revoke"    // POST /v1/kv/{key}:revoke (kind delete)
	// OpSessionAttach is the event a write attaching its key appends on
	// the session's key (its attached list after it); no request names it.
	OpSessionAttach Op = "session_attach"
)

// PurposeSession is the purpose of a session's entry: written only by the
// session ops (and the writes that attach to it).
const PurposeSession = "session"

// MaxSessionKeys bounds the keys, locks and leaderships attached to one
// session, as MaxRangeKeys bounds a range delete: its end deletes them
// all in one Kafka transaction. An attach past it is refused
// too_many_keys.
const MaxSessionKeys = 1000

// Reasons an event names in SessionLink.Reason: why an attached key was
// deleted (or its lock released) and why the session ended.
const (
	SessionRevoked = "session_revoked" // POST :revoke
	SessionExpired = "session_expired" // the sweeper's expiry (or expireDue)
	SessionDeleted = "session_deleted" // a DELETE of the session's key (or a range delete over it)
)

// SessionLink is what an event says of a session: on a write attaching
// its key, the session's key; on an event of a session's end (the
// session's own, and each attached key's delete or release), also the
// reason it ended.
type SessionLink struct {
	Key    string `json:"key"`
	Reason string `json:"reason,omitempty"`
}

// Attachment is one key attached to a session, as the session's value
// lists it. Version is the version the attaching write gave a plain key,
// or the tenure's token of a lock or leadership (Purpose lock or
// leader): at the session's end the key is deleted only when it is
// still at that version (or tenure), so a key written since without the
// session, or a lock released and taken again, is no longer the
// session's.
type Attachment struct {
	Key     string `json:"key"`
	Version int64  `json:"version"`
	Purpose string `json:"purpose,omitempty"`
}

// SessionValue is the value of a session's entry; only the session ops
// and the attaching writes write it.
type SessionValue struct {
	TTLSeconds int64        `json:"ttlSeconds"`
	Attached   []Attachment `json:"attached"`
}

// SessionBody is the body of POST /v1/kv/{key}:session: a new session
// with a TTL (the key must not hold a live entry).
type SessionBody struct {
	TTLSeconds int64  `json:"ttlSeconds"`
	RequestID  string `json:"requestId,omitempty"`
	SpecRef    string `json:"specRef,omitempty"`
}

// Validate checks the body.
func (b *SessionBody) Validate() error {
	if err := checkCommon(nil, b.RequestID, b.SpecRef); err != nil {
		return err
	}
	if b.TTLSeconds < 1 || b.TTLSeconds > MaxTTLSeconds {
		return FieldErrorf(EInvalid, "ttlSeconds", "ttlSeconds (the session's TTL) must be between 1 and %d", MaxTTLSeconds)
	}
	return nil
}

// Idempotent: see PutBody.Idempotent.
func (b *SessionBody) Idempotent() bool { return b.RequestID != "" }

// SessionWriteBody is the body of POST /v1/kv/{key}:keepalive and
// :revoke.
type SessionWriteBody struct {
	// ExpectedVersion, when set, is the version the session must be at.
	ExpectedVersion *int64 `json:"expectedVersion,omitempty"`
	RequestID       string `json:"requestId,omitempty"`
}

// Validate checks the body.
func (b *SessionWriteBody) Validate() error {
	if err := checkCommon(b.ExpectedVersion, b.RequestID, ""); err != nil {
		return err
	}
	if b.ExpectedVersion != nil && *b.ExpectedVersion == 0 {
		return FieldErrorf(EInvalid, "expectedVersion", "expectedVersion must be a positive version: a session write never creates a key")
	}
	return nil
}

// Idempotent: see PutBody.Idempotent.
func (b *SessionWriteBody) Idempotent() bool { return b.RequestID != "" }

// SessionAnswer answers a session write: the session's version, TTL,
// expiry and attached keys after it. Ended is set by a revoke: the
// attached keys it deleted or released (those still the session's).
type SessionAnswer struct {
	Key        string       `json:"key"`
	Version    int64        `json:"version"`
	TTLSeconds int64        `json:"ttlSeconds"`
	ExpiresAt  *time.Time   `json:"expiresAt,omitempty"`
	Attached   []Attachment `json:"attached"`
	Revoked    bool         `json:"revoked,omitempty"`
	Ended      []string     `json:"ended,omitempty"`
}

// checkSession checks the session key a write attaching to one names.
func checkSession(session string) error {
	if session == "" {
		return nil
	}
	_, err := parseKey(session, "session")
	return err
}
