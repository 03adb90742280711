package contract

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Queues (docs/collections.md "Queues"). A queue is a collection whose
// metadata holds, besides size (items pushed and not yet removed or
// acknowledged: ready and in flight) and since, InFlight: the items
// popped with a visibility timeout and not yet acknowledged or requeued.
// Each item is one kv_elements row whose member is elemkey.QueueMember(since,
// priority, push version), so byte order is (incarnation, priority,
// FIFO) and the queue's next item is the first ready row of its
// incarnation's range. Every queue element event carries the item's full
// new row (Element.State and the fields beside it): the projector
// upserts the row to exactly that state, or deletes it when State is
// absent, so compaction keeping an item's latest event and a rebuild
// restore every item exactly.
const (
	OpQPush Op = "qpush" // POST /v1/kv/{key}:qpush
	OpQPop  Op = "qpop"  // POST /v1/kv/{key}:qpop
	OpQAck  Op = "qack"  // POST /v1/kv/{key}:qack
	OpQPeek Op = "qpeek" // GET /v1/kv/{key}:qpeek?count=
	OpQSize Op = "qsize" // GET /v1/kv/{key}:qsize
	// OpQRequeue is the sweeper's return of an in-flight item whose
	// visibility deadline passed: no request names it.
	OpQRequeue Op = "qrequeue"
	// OpQExpire is the sweeper's removal of a ready or in-flight item
	// whose own TTL (a push's itemTtlSeconds: Element.ExpiresAt) passed:
	// no request names it.
	OpQExpire Op = "qexpire"
)

// IsQueueWrite reports whether o is a queue write (push, pop, ack or the
// sweeper's requeue or expire).
func (o Op) IsQueueWrite() bool {
	return o == OpQPush || o == OpQPop || o == OpQAck || o == OpQRequeue || o == OpQExpire
}

// Queue limits.
const (
	// MaxPriority bounds a push's priority both ways (lower is served
	// first).
	MaxPriority = 1_000_000_000
	// MaxVisibilitySeconds bounds a pop's visibility timeout (12 h, as
	// SQS).
	MaxVisibilitySeconds = 12 * 3600
	// MaxPeek bounds the items one qpeek answers.
	MaxPeek = 1000
)

// ReceiptNonceLen is the length of a receipt's random part: 128 bits
// in lowercase hex.
const ReceiptNonceLen = 32

// Receipt names one delivery of an item: its member, the delivery number
// (so a receipt of an earlier delivery, or of an earlier incarnation's
// item, whose member names another since, is told apart from the current
// one) and the delivery's random nonce (Element.ReceiptNonce), so that
// knowing an item's id (a push answers it) is not knowing a receipt:
// <member>#<delivery>#<nonce>. A delivery popped before receipts had a
// nonce has the receipt <member>#<delivery>.
func Receipt(member string, deliveries int64, nonce string) string {
	r := member + "#" + strconv.FormatInt(deliveries, 10)
	if nonce != "" {
		r += "#" + nonce
	}
	return r
}

// ParseReceipt is the inverse of Receipt; a malformed receipt is 400 on
// field receipt. nonce is "" for a receipt without one.
func ParseReceipt(r string) (member string, deliveries int64, nonce string, err error) {
	bad := FieldErrorf(EInvalid, "receipt", "receipt is not one a qpop answered")
	m, rest, ok := strings.Cut(r, "#")
	if !ok {
		return "", 0, "", bad
	}
	if !isItemID(m) {
		return "", 0, "", bad
	}
	n, nonce, withNonce := strings.Cut(rest, "#")
	d, perr := strconv.ParseInt(n, 10, 64)
	if perr != nil || d < 1 || strconv.FormatInt(d, 10) != n {
		return "", 0, "", bad
	}
	if withNonce && !isReceiptNonce(nonce) {
		return "", 0, "", bad
	}
	return m, d, nonce, nil
}

// isReceiptNonce reports whether s is a receipt nonce: ReceiptNonceLen
// lowercase hex digits.
func isReceiptNonce(s string) bool {
	return len(s) == ReceiptNonceLen && strings.Trim(s, "0123456789abcdef") == ""
}

// isItemID reports whether m has the syntax of a queue item's id, the
// kv_elements member the server encodes (elemkey.QueueMember): the
// fixed-width lowercase hex of since, priority+2^63 and version, joined
// by dots, with 1 <= since <= version < 2^63. Fixed-width hex compares
// as the numbers do.
func isItemID(m string) bool {
	const lowest, beyond = "0000000000000001", "8000000000000000"
	if len(m) != 50 || m[16] != '.' || m[33] != '.' {
		return false
	}
	since, prio, version := m[:16], m[17:33], m[34:]
	for _, p := range []string{since, prio, version} {
		if strings.Trim(p, "0123456789abcdef") != "" {
			return false
		}
	}
	return since >= lowest && version >= since && version < beyond
}

// QPushBody is the body of POST :qpush.
type QPushBody struct {
	// Data is the item, any JSON value.
	Data json.RawMessage `json:"data"`
	// Priority: lower is served first; FIFO within a priority.
	Priority int64 `json:"priority,omitempty"`
	// DedupID, when set, makes a repeated push within the dedup window
	// (ESKV_QUEUE_DEDUP_WINDOW) add nothing.
	DedupID         string `json:"dedupId,omitempty"`
	ExpectedVersion *int64 `json:"expectedVersion,omitempty"`
	// TTLSeconds expires the whole queue this long after the write;
	// none keeps its expiry.
	TTLSeconds *int64 `json:"ttlSeconds,omitempty"`
	// ItemTTLSeconds expires this item (not the queue) this long after
	// the push: it is never served after, and the writer's sweeper
	// removes it (qexpire). None: the item never expires.
	ItemTTLSeconds *int64 `json:"itemTtlSeconds,omitempty"`
	RequestID      string `json:"requestId,omitempty"`
}

// Validate checks the body's fields but the data (CompactValue).
func (b *QPushBody) Validate() error {
	if len(b.Data) == 0 {
		return FieldErrorf(EInvalid, "data", "data is required (any JSON value)")
	}
	if b.Priority < -MaxPriority || b.Priority > MaxPriority {
		return FieldErrorf(EInvalid, "priority", "priority must be between %d and %d", -MaxPriority, MaxPriority)
	}
	if b.DedupID != "" {
		if err := ValidateMember("dedupId", b.DedupID); err != nil {
			return err
		}
	}
	if err := checkCommon(b.ExpectedVersion, b.RequestID, ""); err != nil {
		return err
	}
	if b.TTLSeconds != nil && (*b.TTLSeconds < 1 || *b.TTLSeconds > MaxTTLSeconds) {
		return FieldErrorf(EInvalid, "ttlSeconds", "ttlSeconds must be between 1 and %d (omit it to keep the queue's expiry)", MaxTTLSeconds)
	}
	if b.ItemTTLSeconds != nil && (*b.ItemTTLSeconds < 1 || *b.ItemTTLSeconds > MaxTTLSeconds) {
		return FieldErrorf(EInvalid, "itemTtlSeconds", "itemTtlSeconds must be between 1 and %d (omit it for an item that never expires)", MaxTTLSeconds)
	}
	return nil
}

// Idempotent: a retried push without a requestId would push twice.
func (b *QPushBody) Idempotent() bool { return b.RequestID != "" }

// QPopBody is the (optional) body of POST :qpop.
type QPopBody struct {
	// VisibilityTimeoutSeconds, when > 0, hides the item for this long
	// instead of removing it: it returns to the queue unless
	// acknowledged (qack) before. 0 or absent removes it at once.
	VisibilityTimeoutSeconds int64  `json:"visibilityTimeoutSeconds,omitempty"`
	ExpectedVersion          *int64 `json:"expectedVersion,omitempty"`
	RequestID                string `json:"requestId,omitempty"`
}

// Validate checks the body.
func (b *QPopBody) Validate() error {
	if b.VisibilityTimeoutSeconds < 0 || b.VisibilityTimeoutSeconds > MaxVisibilitySeconds {
		return FieldErrorf(EInvalid, "visibilityTimeoutSeconds", "visibilityTimeoutSeconds must be between 0 (remove at once) and %d", MaxVisibilitySeconds)
	}
	return checkCommon(b.ExpectedVersion, b.RequestID, "")
}

// Idempotent: a retried pop without a requestId would pop twice.
func (b *QPopBody) Idempotent() bool { return b.RequestID != "" }

// QAckBody is the body of POST :qack.
type QAckBody struct {
	Receipt   string `json:"receipt"`
	RequestID string `json:"requestId,omitempty"`
}

// Validate checks the body.
func (b *QAckBody) Validate() error {
	if b.Receipt == "" {
		return FieldErrorf(EInvalid, "receipt", "receipt is required")
	}
	if _, _, _, err := ParseReceipt(b.Receipt); err != nil {
		return err
	}
	return checkCommon(nil, b.RequestID, "")
}

// Idempotent: an ack retried without a requestId would be answered
// stale_receipt after the first one removed the item.
func (b *QAckBody) Idempotent() bool { return b.RequestID != "" }

// QPushAnswer answers qpush: the item's id, the queue's size and version
// after the push. Deduplicated: a push with the same dedupId was made
// within the window; nothing was appended and Item is that push's item,
// told only to a principal that may read the queue (to one that may not,
// Item is empty and Priority the request's).
type QPushAnswer struct {
	Queue        string `json:"queue"`
	Item         string `json:"item,omitempty"`
	Priority     int64  `json:"priority"`
	Size         int64  `json:"size"`
	Version      int64  `json:"version"`
	Deduplicated bool   `json:"deduplicated,omitempty"`
}

// QPopAnswer answers qpop: the item, the receipt that acknowledges this
// delivery, and with a visibility timeout its deadline.
type QPopAnswer struct {
	Queue      string          `json:"queue"`
	Data       json.RawMessage `json:"data"`
	Item       string          `json:"item"`
	Receipt    string          `json:"receipt"`
	Priority   int64           `json:"priority"`
	Deliveries int64           `json:"deliveries"`
	Deadline   *time.Time      `json:"deadline,omitempty"`
	// VisibilityTimeout is the pop's, in seconds (the seed's
	// visibility_timeout); absent without one.
	VisibilityTimeout int64 `json:"visibility_timeout,omitempty"`
	// ExpiresAt is the item's own expiry (a push's itemTtlSeconds);
	// absent: it never expires.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	Size      int64      `json:"size"`
	Version   int64      `json:"version"`
}

// QAckAnswer answers qack.
type QAckAnswer struct {
	Queue   string `json:"queue"`
	Acked   bool   `json:"acked"`
	Size    int64  `json:"size"`
	Version int64  `json:"version"`
}

// QueueItem is one item of a qpeek answer.
type QueueItem struct {
	Item       string          `json:"item"`
	Data       json.RawMessage `json:"data"`
	Priority   int64           `json:"priority"`
	Deliveries int64           `json:"deliveries"`
	// ExpiresAt is the item's own expiry (a push's itemTtlSeconds);
	// absent: it never expires.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// QPeekAnswer answers qpeek: the next ready items in serving order.
// Truncated: their bytes passed the server's page budget, and Items are
// fewer than asked for (but always one).
type QPeekAnswer struct {
	Queue     string      `json:"queue"`
	Items     []QueueItem `json:"items"`
	Truncated bool        `json:"truncated,omitempty"`
	// Position is the log position the answer reflects (a watch cursor,
	// p<partition>.o<offset>): every event of the key's partition up to
	// it and none after.
	Position string `json:"position,omitempty"`
}

// QSizeAnswer answers qsize: 0 for a missing queue.
type QSizeAnswer struct {
	Queue    string `json:"queue"`
	Size     int64  `json:"size"`
	InFlight int64  `json:"inFlight"`
}
