package contract

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Cursor is a watch position: the kv.changes partition and the offset
// of an event in it. Resuming "after" a cursor delivers the events of
// greater offsets. Being the log's own offset, it stays valid across
// writer restarts and partition moves. Its text is p<partition>.o<offset>;
// offset -1 is the position before a partition's first event.
type Cursor struct {
	Partition int32
	Offset    int64
}

// String returns the cursor's text.
func (c Cursor) String() string {
	return "p" + strconv.FormatInt(int64(c.Partition), 10) + ".o" + strconv.FormatInt(c.Offset, 10)
}

// ParseCursor parses a cursor's text strictly (no sign, no leading
// zero, no blank): one text per cursor. The error is invalid on field.
func ParseCursor(s, field string) (Cursor, error) {
	bad := FieldErrorf(EInvalid, field, "%q is not a watch cursor (p<partition>.o<offset>, as an event's cursor says)", s)
	ps, os, ok := strings.Cut(s, ".o")
	if !ok || !strings.HasPrefix(ps, "p") {
		return Cursor{}, bad
	}
	p, err1 := strconv.ParseInt(ps[1:], 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if err1 != nil || err2 != nil || p < 0 || o < -1 {
		return Cursor{}, bad
	}
	c := Cursor{Partition: int32(p), Offset: o}
	if c.String() != s {
		return Cursor{}, bad
	}
	return c, nil
}

// WatchEvent is one change as a watch delivers it (the data of an SSE
// event "change"): the event's key, version, kind and op, the value
// after it (absent on delete and expire), its time, principal, requestId,
// transaction, element (collection events) and its resume cursor.
type WatchEvent struct {
	Cursor    string          `json:"cursor"`
	Key       string          `json:"key"`
	Version   int64           `json:"version"`
	Kind      Kind            `json:"kind"`
	Op        Op              `json:"op"`
	Value     json.RawMessage `json:"value,omitempty"`
	ExpiresAt *time.Time      `json:"expiresAt,omitempty"`
	Time      time.Time       `json:"time"`
	Principal string          `json:"principal"`
	// Directive is the event's (Event.Directive); absent when none.
	Directive string   `json:"directive,omitempty"`
	RequestID string   `json:"requestId,omitempty"`
	TxnID     string   `json:"txnId,omitempty"`
	TxnSize   int      `json:"txnSize,omitempty"`
	Element   *Element `json:"element,omitempty"`
}

// WatchEnd is the data of the SSE event "error" that ends a watch: why
// (slow_consumer, cursor_expired, partition_unavailable, ...) and, when
// the watch may be resumed, the cursor to resume after (the last event
// sent; absent when none was).
type WatchEnd struct {
	Error  ErrorDetail `json:"error"`
	Cursor string      `json:"cursor,omitempty"`
}
