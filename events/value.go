package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
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
	if msg := checkNumbers(buf.Bytes()); msg != "" {
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

// maxFractionDigits bounds the digits after the decimal point a number may
// need written out (1e-20 needs 20): Postgres numeric, and so jsonb, holds
// at most 16383.
const maxFractionDigits = 16000

// checkNumbers reports a number in the valid, compact JSON b that the
// rest of the system cannot hold: beyond the range of a 64-bit float
// (RFC 8785 canonical JSON, which the audit hashes, is defined on IEEE 754
// doubles, and Postgres jsonb rejects 1e200000), or needing more
// fractional digits than Postgres numeric has. Either would stop the
// projector or the auditor at the event.
func checkNumbers(b []byte) string {
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(b) && bytes.IndexByte([]byte("0123456789+-.eE"), b[j]) >= 0 {
				j++
			}
			if msg := checkNumber(string(b[i:j])); msg != "" {
				return msg
			}
			i = j - 1
		}
	}
	return ""
}

// checkNumber checks one JSON number literal; see checkNumbers.
func checkNumber(n string) string {
	if _, err := strconv.ParseFloat(n, 64); err != nil {
		return fmt.Sprintf("number %s is outside the range of a 64-bit float", abbrevNumber(n))
	}
	mant, exp, _ := strings.Cut(strings.ToLower(n), "e")
	_, frac, _ := strings.Cut(mant, ".")
	e, err := strconv.Atoi(exp)
	if exp == "" {
		e, err = 0, nil
	}
	if err != nil || len(frac)-e > maxFractionDigits {
		return fmt.Sprintf("number %s has more than %d digits after the decimal point", abbrevNumber(n), maxFractionDigits)
	}
	return ""
}

func abbrevNumber(n string) string {
	if len(n) > 32 {
		return n[:29] + "..."
	}
	return n
}

func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}
