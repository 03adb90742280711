package contract

import (
	"bytes"
	"encoding/json"
	"time"
)

// SchemaVersion is the version of the event JSON in schemas/events. It
// changes only additively.
const SchemaVersion = 1

// Kind is what an event does to its key.
type Kind string

// Event kinds. A delete and an expire are ordinary records, never Kafka
// tombstones: the latest record per key must always describe a valid
// state, including "absent since version N".
const (
	KindPut    Kind = "put"
	KindDelete Kind = "delete"
	KindExpire Kind = "expire"
)

// Purposes are the allowed values of Semantics.Purpose.
var Purposes = []string{"checkpoint", "feature_flag", "lock", "leader", "cursor", "counter", "config", "other", "set", "queue", "list", "session"}

// Semantics is what producers say about an entry, so the platform can
// reason about usage and lifecycle.
type Semantics struct {
	Purpose       string   `json:"purpose"`
	Producer      string   `json:"producer,omitempty"`
	ConsumerHints []string `json:"consumerHints,omitempty"`
	TTLSeconds    int64    `json:"ttlSeconds,omitempty"`
}

// Entry is the current state of a key, as reads return it.
type Entry struct {
	Key        string          `json:"key"`
	Value      json.RawMessage `json:"value"`
	Version    int64           `json:"version"`
	CreatedAt  time.Time       `json:"createdAt"`
	UpdatedAt  time.Time       `json:"updatedAt"`
	ExpiresAt  *time.Time      `json:"expiresAt,omitempty"`
	LastWriter string          `json:"lastWriter"`
	RequestID  string          `json:"requestId,omitempty"`
	SpecRef    string          `json:"specRef,omitempty"`
	Semantics  Semantics       `json:"semantics"`
}

// Expired reports whether the entry is past its expiry at now.
func (e *Entry) Expired(now time.Time) bool {
	return e.ExpiresAt != nil && !now.Before(*e.ExpiresAt)
}

// Event is one fact in the changelog kv.changes. It carries the full
// resulting value (After) and the previous one (Before), so consumers fold
// events without re-running business logic. (Key, Version) is its identity.
type Event struct {
	SchemaVersion int             `json:"schemaVersion"`
	Key           string          `json:"key"`
	Scope         string          `json:"scope"`
	Version       int64           `json:"version"`
	PrevVersion   int64           `json:"prevVersion"`
	Kind          Kind            `json:"kind"`
	Op            Op              `json:"op"`
	Before        json.RawMessage `json:"before"`
	After         json.RawMessage `json:"after"`
	CreatedAt     time.Time       `json:"createdAt"`
	ExpiresAt     *time.Time      `json:"expiresAt,omitempty"`
	Semantics     Semantics       `json:"semantics"`
	SpecRef       string          `json:"specRef,omitempty"`
	RequestID     string          `json:"requestId,omitempty"`
	// RequestDigest identifies the request body that produced the event, so
	// a retried requestId can be told apart from a reused one.
	RequestDigest string    `json:"requestDigest,omitempty"`
	Principal     string    `json:"principal"`
	TS            time.Time `json:"ts"`
	WriterEpoch   int64     `json:"writerEpoch"`
	// TxnID is set on the events of a multi-key transaction (POST
	// /v1/txn): every event of one transaction carries the same id, and
	// TxnSize is how many events it appended. They are appended together,
	// contiguous, in one Kafka transaction; consumers that need the whole
	// transaction (the projector, watchers) apply them together.
	TxnID   string `json:"txnId,omitempty"`
	TxnSize int    `json:"txnSize,omitempty"`
	// Element is the element change of an event of a collection (a set's
	// sadd or srem; docs/collections.md): the projector applies it to
	// kv_elements in the transaction that folds the event. Absent on
	// every other event.
	Element *Element `json:"element,omitempty"`
	// Session is set on the events of sessions (session.go): a write
	// attaching its key names its session; the events of a session's
	// end (its own and each attached key's delete or release, appended
	// together under one txnId) name it and the reason it ended.
	Session *SessionLink `json:"session,omitempty"`
}

// Live reports whether the key exists after the event.
func (e *Event) Live() bool { return e.Kind == KindPut }

// Entry returns the state of the key after the event. It is only
// meaningful when Live.
func (e *Event) Entry() Entry {
	return Entry{
		Key:        e.Key,
		Value:      e.After,
		Version:    e.Version,
		CreatedAt:  e.CreatedAt,
		UpdatedAt:  e.TS,
		ExpiresAt:  e.ExpiresAt,
		LastWriter: e.Principal,
		RequestID:  e.RequestID,
		SpecRef:    e.SpecRef,
		Semantics:  e.Semantics,
	}
}

// EncodeJSON encodes v as compact JSON without rewriting <, > and & in
// strings (json.Marshal escapes them for HTML), and without a trailing
// newline.
func EncodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
