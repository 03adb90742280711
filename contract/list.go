package contract

import (
	"encoding/json"
)

// Lists (docs/collections.md). A list is a collection whose metadata
// holds, besides size and since, Head: the position of its first element.
// Its elements are at positions Head .. Head+Size-1, one kv_elements row
// each whose member is the position's fixed-width encoding
// (elemkey.ListPosition), so byte order is list order and a range of the list is
// one range scan. lpush writes position Head-1, rpush Head+Size, lpop and
// rpop remove the row at either end, and ltrim only moves Head and Size:
// every write decides on the metadata and at most one element, whatever
// the list's length. Rows outside [Head, Head+Size-1] are not elements:
// every read and decision ignores them.
const (
	OpLPush  Op = "lpush"  // POST /v1/kv/{key}:lpush
	OpRPush  Op = "rpush"  // POST /v1/kv/{key}:rpush
	OpLPop   Op = "lpop"   // POST /v1/kv/{key}:lpop
	OpRPop   Op = "rpop"   // POST /v1/kv/{key}:rpop
	OpLTrim  Op = "ltrim"  // POST /v1/kv/{key}:ltrim
	OpLRange Op = "lrange" // GET /v1/kv/{key}:lrange?start=&stop=
	OpLLen   Op = "llen"   // GET /v1/kv/{key}:llen
)

// PushBody is the body of POST /v1/kv/{key}:lpush and :rpush.
type PushBody struct {
	// Value is any JSON value (the seed's strings are JSON strings).
	Value           json.RawMessage `json:"value"`
	ExpectedVersion *int64          `json:"expectedVersion,omitempty"`
	// TTLSeconds expires the whole list this long after the write; none
	// keeps its expiry.
	TTLSeconds *int64 `json:"ttlSeconds,omitempty"`
	RequestID  string `json:"requestId,omitempty"`
}

// Validate checks the body's fields but the value (CompactValue).
func (b *PushBody) Validate() error {
	if err := checkCommon(b.ExpectedVersion, b.RequestID, ""); err != nil {
		return err
	}
	return checkListTTL(b.TTLSeconds)
}

func checkListTTL(ttl *int64) error {
	if ttl != nil && (*ttl < 1 || *ttl > MaxTTLSeconds) {
		return FieldErrorf(EInvalid, "ttlSeconds", "ttlSeconds must be between 1 and %d (omit it to keep the list's expiry)", MaxTTLSeconds)
	}
	return nil
}

// Idempotent: a retried push without a requestId would push twice.
func (b *PushBody) Idempotent() bool { return b.RequestID != "" }

// PopBody is the (optional) body of POST :lpop and :rpop.
type PopBody struct {
	ExpectedVersion *int64 `json:"expectedVersion,omitempty"`
	RequestID       string `json:"requestId,omitempty"`
}

// Validate checks the body.
func (b *PopBody) Validate() error { return checkCommon(b.ExpectedVersion, b.RequestID, "") }

// Idempotent: a retried pop without a requestId would pop twice.
func (b *PopBody) Idempotent() bool { return b.RequestID != "" }

// TrimBody is the body of POST :ltrim: keep the elements start..stop
// (inclusive, negative from the end, as Redis LTRIM).
type TrimBody struct {
	Start           *int64 `json:"start"`
	Stop            *int64 `json:"stop"`
	ExpectedVersion *int64 `json:"expectedVersion,omitempty"`
	RequestID       string `json:"requestId,omitempty"`
}

// Validate checks the body.
func (b *TrimBody) Validate() error {
	if b.Start == nil {
		return FieldErrorf(EInvalid, "start", "start is required")
	}
	if b.Stop == nil {
		return FieldErrorf(EInvalid, "stop", "stop is required")
	}
	return checkCommon(b.ExpectedVersion, b.RequestID, "")
}

// Idempotent: a trim of the same range twice keeps the same elements
// only when nothing was pushed between: retried only with a requestId.
func (b *TrimBody) Idempotent() bool { return b.RequestID != "" }

// ListChangeAnswer answers lpush, rpush, lpop, rpop and ltrim: the value
// pushed or popped (absent after ltrim, and after a pop of an empty or
// missing list, which answers 404 not_found instead), the list's length
// and version after the request.
type ListChangeAnswer struct {
	List    string          `json:"list"`
	Value   json.RawMessage `json:"value,omitempty"`
	Length  int64           `json:"length"`
	Version int64           `json:"version"`
}

// RangeAnswer answers GET :lrange: the values start..stop in list order.
// Truncated: the range held more values than one page holds (MaxRange,
// or the server's byte budget of a page, but always one), and Values are
// its first ones: ask again from start+len(Values).
type RangeAnswer struct {
	List      string            `json:"list"`
	Values    []json.RawMessage `json:"values"`
	Truncated bool              `json:"truncated,omitempty"`
	// Position is the log position the answer reflects (a watch cursor,
	// p<partition>.o<offset>): every event of the key's partition up to
	// it and none after. Watching after it delivers exactly the later
	// changes.
	Position string `json:"position,omitempty"`
}

// LenAnswer answers GET :llen: 0 for a list that does not exist.
type LenAnswer struct {
	List   string `json:"list"`
	Length int64  `json:"length"`
}

// MaxRange bounds the values one lrange answers: a wider range is cut to
// its first MaxRange, or fewer when their bytes pass the server's page
// budget (RangeAnswer.Truncated); the client pages by index.
const MaxRange = 10000
