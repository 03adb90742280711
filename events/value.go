package events

import (
	"bytes"
	"encoding/json"
)

// DefaultMaxValueBytes is the default limit on a serialized value.
const DefaultMaxValueBytes = 64 << 10

// CompactValue validates raw as one JSON value of at most limit bytes once
// compacted, and returns the compact form that is stored and hashed.
func CompactValue(raw json.RawMessage, limit int) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, FieldErrorf(EInvalid, "value", "value is required (use null explicitly)")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, FieldErrorf(EInvalid, "value", "value is not valid JSON: %v", err)
	}
	if buf.Len() > limit {
		return nil, FieldErrorf(ETooLarge, "value", "value is %d bytes serialized; the limit is %d", buf.Len(), limit)
	}
	return buf.Bytes(), nil
}
