package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/eskv/eskv/contract"
)

// CompactValue validates raw as one JSON value of at most limit bytes once
// compacted, and returns the compact form that is stored and hashed.
// jsontext checks and compacts it in one pass, refusing what eskv refuses
// besides invalid JSON (invalid UTF-8, a member named twice, an unpaired
// surrogate escape); what it refuses is looked at again by checkValue,
// whose first finding is the answer, so every refusal keeps its message.
func CompactValue(raw json.RawMessage, limit int) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, contract.FieldErrorf(contract.EInvalid, "value", "value is required (use null explicitly)")
	}
	out := jsontext.Value(bytes.Clone(raw))
	if err := out.Compact(jsontext.AllowDuplicateNames(false), jsontext.AllowInvalidUTF8(false)); err != nil {
		return checkValue(raw, limit)
	}
	if msg := checkEscapes(out); msg != "" {
		return nil, contract.FieldErrorf(contract.EInvalid, "value", "%s", msg)
	}
	if msg := checkNumbers(out); msg != "" {
		return nil, contract.FieldErrorf(contract.EInvalid, "value", "%s", msg)
	}
	if len(out) > limit {
		return nil, tooLarge(len(out), limit)
	}
	return json.RawMessage(out), nil
}

// checkValue is CompactValue one check at a time, in the order that
// picks a refusal's message: JSON (encoding/json's message), UTF-8,
// escapes, numbers, duplicate members, size.
func checkValue(raw json.RawMessage, limit int) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, contract.FieldErrorf(contract.EInvalid, "value", "value is not valid JSON: %v", err)
	}
	out := buf.Bytes()
	// json.Compact passes any byte through inside strings; JSON text must
	// be UTF-8 (RFC 8259), and Postgres jsonb rejects anything else.
	if !utf8.Valid(out) {
		return nil, contract.FieldErrorf(contract.EInvalid, "value", "value is not valid UTF-8")
	}
	if msg := checkEscapes(out); msg != "" {
		return nil, contract.FieldErrorf(contract.EInvalid, "value", "%s", msg)
	}
	if msg := checkNumbers(out); msg != "" {
		return nil, contract.FieldErrorf(contract.EInvalid, "value", "%s", msg)
	}
	if name, dup := duplicateMember(out); dup {
		return nil, contract.FieldErrorf(contract.EInvalid, "value", "value names the member %s twice in one object", abbrevName(name))
	}
	if len(out) > limit {
		return nil, tooLarge(len(out), limit)
	}
	return out, nil
}

func tooLarge(n, limit int) error {
	return contract.FieldErrorf(contract.ETooLarge, "value", "value is %d bytes serialized; the limit is %d", n, limit)
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
		r := Hex4(b[i+1 : i+5])
		i += 4
		switch {
		case r == 0:
			return `value contains the escape \u0000, which cannot be stored`
		case r >= 0xd800 && r < 0xdc00:
			if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
				if lo := Hex4(b[i+3 : i+7]); lo >= 0xdc00 && lo < 0xe000 {
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
			// Without an exponent, 300 characters hold neither a
			// number beyond a double nor too many fraction digits.
			if j-i > 300 || bytes.ContainsAny(b[i:j], "eE") {
				if msg := checkNumber(string(b[i:j])); msg != "" {
					return msg
				}
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

// duplicateMember reports a member name that appears twice in one
// object, at any depth, of the valid JSON b, the first one a reader from
// the start meets. Names compare as decoded ("a" and "\u0061" are one
// name). encoding/json keeps the last of two members, other parsers the
// first: a value or a request body with both means different things to
// different readers, so eskv refuses it.
func duplicateMember(b []byte) (name string, dup bool) {
	v := jsontext.Value(bytes.Clone(b))
	err := v.Compact(jsontext.AllowDuplicateNames(false))
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) || !errors.Is(err, jsontext.ErrDuplicateName) {
		return "", false
	}
	return se.JSONPointer.LastToken(), true
}

// Members calls f with the name (decoded) and the value of each member of
// the object b, valid JSON, in order, and stops at f's first error. It
// does nothing when b is not an object. It reads no deeper than the
// members: a value is passed as its bytes, skipped at the speed of a scan.
func Members(b []byte, f func(name string, value []byte) error) error {
	s := scanner{b: b}
	if s.peek() != '{' {
		return nil
	}
	return s.members(func(name []byte) error {
		start := s.value()
		if err := s.skipValue(); err != nil {
			return err
		}
		return f(string(name), b[start:s.i])
	})
}

// Elements calls f with each element of the array b, valid JSON, in
// order, and stops at f's first error. It does nothing when b is not an
// array.
func Elements(b []byte, f func(i int, value []byte) error) error {
	s := scanner{b: b}
	if s.peek() != '[' {
		return nil
	}
	n := 0
	return s.elements(func() error {
		start := s.value()
		if err := s.skipValue(); err != nil {
			return err
		}
		n++
		return f(n-1, b[start:s.i])
	})
}

func abbrevName(n string) string {
	if len(n) > 64 {
		n = n[:61] + "..."
	}
	return strconv.Quote(n)
}

// AppendCompact appends src with insignificant spaces elided, as
// json.Compact does (the same bytes, and its error for invalid JSON); a
// src that is compact already (compactJSON) is appended as it is, without
// json.Compact's scanner. Entries are answered through it: values from
// the overlay are compact, values from Postgres jsonb are not.
func AppendCompact(dst, src []byte) ([]byte, error) {
	if compactJSON(src) {
		return append(dst, src...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, src); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

// MaxScanDepth is the deepest nesting ScanValue reads (encoding/json
// allows 10000): deeper values are left to encoding/json.
const MaxScanDepth = 512

// compactJSON reports whether b is one valid JSON value without a single
// insignificant space: one that json.Compact accepts and returns as it
// is.
func compactJSON(b []byte) bool {
	compact, err := scanCompact(b)
	return err == nil && compact
}

// ScanValue reads the JSON value that starts at b[i] (no space before
// it) as encoding/json's scanner does, and returns where it ends and
// whether it holds insignificant spaces. ok is false where encoding/json
// would refuse the value, and also for values nested deeper than
// MaxScanDepth, which it might accept: a caller then leaves the value to
// encoding/json. It allocates nothing, for the hot paths that read
// values before they are stored or answered (the PUT body).
func ScanValue(b []byte, i int) (end int, spaced, ok bool) {
	if i >= len(b) || isSpace(b[i]) {
		return i, false, false
	}
	s := scanner{b: b, i: i, limit: MaxScanDepth}
	err := s.skipValue()
	return s.i, s.spaced, err == nil
}
