package events

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
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
	// json.Compact passes any byte through inside strings; JSON text must
	// be UTF-8 (RFC 8259), and Postgres jsonb rejects anything else.
	if !utf8.Valid(buf.Bytes()) {
		return nil, FieldErrorf(EInvalid, "value", "value is not valid UTF-8")
	}
	if msg := checkEscapes(buf.Bytes()); msg != "" {
		return nil, FieldErrorf(EInvalid, "value", "%s", msg)
	}
	if buf.Len() > limit {
		return nil, FieldErrorf(ETooLarge, "value", "value is %d bytes serialized; the limit is %d", buf.Len(), limit)
	}
	return buf.Bytes(), nil
}

// checkEscapes reports a \u0000 escape or an escaped unpaired UTF-16
// surrogate in the valid JSON b. Both are valid JSON, but Postgres jsonb
// rejects them (a projector would stop at the event) and RFC 8785
// canonical JSON, which the audit hashes, forbids unpaired surrogates.
func checkEscapes(b []byte) string {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		// In valid JSON a backslash starts an escape inside a string.
		i++
		if b[i] != 'u' {
			continue
		}
		r := hex4(b[i+1 : i+5])
		i += 4
		switch {
		case r == 0:
			return `value contains the escape \u0000, which cannot be stored`
		case r >= 0xd800 && r < 0xdc00:
			if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
				if lo := hex4(b[i+3 : i+7]); lo >= 0xdc00 && lo < 0xe000 {
					i += 6
					continue
				}
			}
			return "value contains an unpaired UTF-16 surrogate escape"
		case r >= 0xdc00 && r < 0xe000:
			return "value contains an unpaired UTF-16 surrogate escape"
		}
	}
	return ""
}

func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}
