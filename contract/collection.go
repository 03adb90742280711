package contract

import (
	"encoding/json"
	"fmt"
	"time"
)

// Collections (docs/collections.md). A collection is one key of a
// project whose entry holds the collection's metadata as its value
// (CollectionMeta) and whose elements live beside it, in the
// projection's kv_elements. Every element change is one event on the
// collection key (version+1, After the new metadata) carrying the change
// in Event.Element, so versions, expectedVersion, the requestId window,
// the audit chain and the log work as for any key. Sets come first;
// queues and lists extend Element and CollectionMeta.

// Entry purposes of collections: written only by their ops, as lock and
// leader entries are by theirs (a plain PUT, PATCH, increment or
// transaction cannot forge or change one; a DELETE removes the whole
// collection).
const (
	PurposeSet   = "set"
	PurposeQueue = "queue"
	PurposeList  = "list"
)

// IsCollectionPurpose reports whether entries of purpose are collections.
func IsCollectionPurpose(purpose string) bool {
	return purpose == PurposeSet || purpose == PurposeQueue || purpose == PurposeList
}

// ServerPurpose reports whether entries of purpose are written only by
// their own ops (locks, leader pools, collections and sessions), never
// by a plain write.
func ServerPurpose(purpose string) bool {
	return purpose == PurposeLock || purpose == PurposeLeader || purpose == PurposeSession || IsCollectionPurpose(purpose)
}

// Set ops. Writes append one event on the set's key (or nothing when
// they change nothing); reads are answered by the key's owner.
const (
	OpSAdd      Op = "sadd"      // POST /v1/kv/{key}:sadd
	OpSRem      Op = "srem"      // POST /v1/kv/{key}:srem
	OpSIsMember Op = "sismember" // GET /v1/kv/{key}:sismember?member=
	OpSMembers  Op = "smembers"  // GET /v1/kv/{key}:smembers?limit=&cursor=
	OpSCard     Op = "scard"     // GET /v1/kv/{key}:scard
)

// Element change ops (Element.Op).
const (
	ElementAdd    = "add"
	ElementRemove = "remove"
)

// Element is the element change an event of a collection carries: for a
// set, the member added or removed. Queues and lists will add their
// members (sequence, priority, data) here, optional like these.
type Element struct {
	Op     string `json:"op"`
	Member string `json:"member"`
	// Value is a list element's value: pushed (op add) or popped (op
	// remove); members are list positions (elemkey.ListPosition).
	Value json.RawMessage `json:"value,omitempty"`
	// A queue item's full row after the event (events/queue.go): its
	// State (absent: the row is deleted; then Op is remove), Deliveries
	// so far, VisibleAt (the deadline of an in-flight delivery), its
	// DedupID and PushedAt, and ExpiresAt (the item's own expiry, a
	// push's itemTtlSeconds: never served at or after it, removed by the
	// sweeper's qexpire; absent: never); Value is its data on every queue
	// event.
	State      string     `json:"state,omitempty"`
	Deliveries int64      `json:"deliveries,omitempty"`
	VisibleAt  *time.Time `json:"visibleAt,omitempty"`
	DedupID    string     `json:"dedupId,omitempty"`
	PushedAt   *time.Time `json:"pushedAt,omitempty"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	// ReceiptNonce is the random part of the receipt of a queue item's
	// delivery (events/queue.go Receipt): set by the pop that delivers
	// it, kept while the delivery is in flight, cleared by the ack,
	// requeue or expire that ends it. An ack must name it, so a receipt
	// cannot be derived from the item's id. Absent on deliveries popped
	// before receipts had one. Never shown by history or watch answers
	// (public).
	ReceiptNonce string `json:"receiptNonce,omitempty"`
}

// CollectionMeta is the value of a collection's entry: its type, its
// size, and Since, the version that created it. A kv_elements row
// written before Since belongs to an earlier collection of the same key
// (deleted or expired since) and is not an element: deleting a
// collection is one event, whatever its size, and its rows are skipped,
// never read as members.
type CollectionMeta struct {
	Type  string `json:"type"`
	Size  int64  `json:"size"`
	Since int64  `json:"since"`
	// Head is a list's first position (absent: 0); its elements are at
	// Head .. Head+Size-1 (events/list.go).
	Head int64 `json:"head,omitempty"`
	// InFlight counts a queue's items popped with a visibility timeout
	// and not yet acknowledged or requeued (they count in Size too).
	InFlight int64 `json:"inFlight,omitempty"`
}

// ParseCollectionMeta reads the metadata of a collection entry's value.
func ParseCollectionMeta(v json.RawMessage) (CollectionMeta, error) {
	var m CollectionMeta
	if err := json.Unmarshal(v, &m); err != nil {
		return m, fmt.Errorf("collection metadata: %w", err)
	}
	if !IsCollectionPurpose(m.Type) || m.Size < 0 || m.Since < 1 || m.InFlight < 0 || m.InFlight > m.Size {
		return m, fmt.Errorf("collection metadata: type %q size %d since %d is not valid", m.Type, m.Size, m.Since)
	}
	return m, nil
}

// MaxMemberBytes bounds a set member, in bytes. Members are data, never
// part of a key: any UTF-8 without NUL (what Postgres text stores).
const MaxMemberBytes = 1024

// ValidateMember checks a set member given as field.
func ValidateMember(field, m string) error {
	if m == "" || len(m) > MaxMemberBytes {
		return FieldErrorf(EInvalid, field, "%s must be 1 to %d bytes", field, MaxMemberBytes)
	}
	return checkText(field, m)
}

// MemberBody is the body of POST /v1/kv/{key}:sadd and :srem.
type MemberBody struct {
	Member string `json:"member"`
	// ExpectedVersion, when set, is the version the set must have
	// (0: must not exist).
	ExpectedVersion *int64 `json:"expectedVersion,omitempty"`
	// TTLSeconds, on sadd, expires the whole set this long after the
	// write; none keeps its expiry.
	TTLSeconds *int64 `json:"ttlSeconds,omitempty"`
	RequestID  string `json:"requestId,omitempty"`
}

// Validate checks the body.
func (b *MemberBody) Validate() error {
	if err := ValidateMember("member", b.Member); err != nil {
		return err
	}
	if err := checkCommon(b.ExpectedVersion, b.RequestID, ""); err != nil {
		return err
	}
	if b.TTLSeconds != nil && (*b.TTLSeconds < 1 || *b.TTLSeconds > MaxTTLSeconds) {
		return FieldErrorf(EInvalid, "ttlSeconds", "ttlSeconds must be between 1 and %d (omit it to keep the set's expiry)", MaxTTLSeconds)
	}
	return nil
}

// TTL is the set's new TTL in seconds; 0 keeps its expiry.
func (b *MemberBody) TTL() int64 {
	if b.TTLSeconds == nil {
		return 0
	}
	return *b.TTLSeconds
}

// Idempotent: see PutBody.Idempotent. Without a requestId a retried
// sadd could add back a member another client removed meanwhile, so
// only a request with one is retried (the Go client gives every sadd and
// srem one).
func (b *MemberBody) Idempotent() bool { return b.RequestID != "" }

// SetChangeAnswer answers sadd and srem: whether the member was added
// (removed), the set's size and version after the request. Changed
// false means nothing was appended (the member was already there, or
// already absent), as Redis answers 0.
type SetChangeAnswer struct {
	Set     string `json:"set"`
	Added   *bool  `json:"added,omitempty"`
	Removed *bool  `json:"removed,omitempty"`
	Size    int64  `json:"size"`
	Version int64  `json:"version"`
}

// IsMemberAnswer answers GET :sismember.
type IsMemberAnswer struct {
	Set      string `json:"set"`
	IsMember bool   `json:"isMember"`
}

// CardAnswer answers GET :scard: 0 for a set that does not exist.
type CardAnswer struct {
	Set  string `json:"set"`
	Size int64  `json:"size"`
}

// MembersAnswer is a page of GET :smembers: members in byte order after
// the request's cursor; Cursor, when set, continues after the last one.
type MembersAnswer struct {
	Set     string   `json:"set"`
	Members []string `json:"members"`
	Cursor  string   `json:"cursor,omitempty"`
	// Position is the log position the answer reflects (a watch cursor,
	// p<partition>.o<offset>): every event of the key's partition up to
	// it and none after. Watching after it delivers exactly the later
	// changes.
	Position string `json:"position,omitempty"`
}
