package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/eskv/eskv/contract"
)

// CompactValue validates raw as one JSON value of at most limit bytes once
// compacted, and returns the compact form that is stored and hashed.
func CompactValue(raw json.RawMessage, limit int) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, contract.FieldErrorf(contract.EInvalid, "value", "value is required (use null explicitly)")
	}
	var out []byte
	if compactJSON(raw) {
		// Already compact, as clients and eskv's own answers send
		// values: json.Compact would return the same bytes, through
		// its scanner's per-byte state machine and a growing buffer.
		out = bytes.Clone(raw)
	} else {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, contract.FieldErrorf(contract.EInvalid, "value", "value is not valid JSON: %v", err)
		}
		out = buf.Bytes()
	}
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
	if name, dup := DuplicateMember(out); dup {
		return nil, contract.FieldErrorf(contract.EInvalid, "value", "value names the member %s twice in one object", abbrevName(name))
	}
	if len(out) > limit {
		return nil, contract.FieldErrorf(contract.ETooLarge, "value", "value is %d bytes serialized; the limit is %d", len(out), limit)
	}
	return out, nil
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

// DuplicateMember reports a member name that appears twice in one object,
// at any depth, of the valid JSON b. Names compare as decoded ("a" and
// "\u0061" are one name). encoding/json keeps the last of two members,
// other parsers the first: a value or a request body with both means
// different things to different readers, so eskv refuses it.
func DuplicateMember(b []byte) (name string, dup bool) {
	// The names of the open objects live on the stack: plain functions
	// on local slices (addName), not methods of a struct holding them,
	// which made the compiler move both arrays (2 KiB) to the heap on
	// every call, and CompactValue calls this on every value written.
	var namesBuf [64][]byte
	var objectsBuf [16]openObject
	names, objects := namesBuf[:0], objectsBuf[:0]
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{':
			objects = append(objects, openObject{start: len(names)})
		case '}':
			names = names[:objects[len(objects)-1].start]
			objects = objects[:len(objects)-1]
		case '"':
			end := stringEnd(b, i)
			if isName(b, end) {
				if names, dup = addName(names, &objects[len(objects)-1], b[i:end+1]); dup {
					return string(decodeName(b[i : end+1])), true
				}
			}
			i = end
		}
	}
	return "", false
}

// Members calls f with the name (decoded) and the value of each member of
// the object b, valid JSON, in order, and stops at f's first error. It
// does nothing when b is not an object. It reads no deeper than the
// members: a value is passed as its bytes, skipped at the speed of a scan.
func Members(b []byte, f func(name string, value []byte) error) error {
	return eachItem(b, '{', func(b []byte, i int) (int, error) {
		end := stringEnd(b, i)
		name := decodeName(b[i : end+1])
		i = skipSpace(b, skipSpace(b, end+1)+1) // past the colon
		j := valueEnd(b, i)
		return j, f(string(name), b[i:j])
	})
}

// Elements calls f with each element of the array b, valid JSON, in
// order, and stops at f's first error. It does nothing when b is not an
// array.
func Elements(b []byte, f func(i int, value []byte) error) error {
	n := 0
	return eachItem(b, '[', func(b []byte, i int) (int, error) {
		j := valueEnd(b, i)
		n++
		return j, f(n-1, b[i:j])
	})
}

// eachItem calls item at the start of each item of the object or array
// (open is '{' or '[') b, valid JSON; item returns where the item ends.
func eachItem(b []byte, open byte, item func(b []byte, i int) (int, error)) error {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != open {
		return nil
	}
	for i = skipSpace(b, i+1); b[i] != '}' && b[i] != ']'; {
		j, err := item(b, i)
		if err != nil {
			return err
		}
		if i = skipSpace(b, j); b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the index just past the value that starts at b[i] in
// valid JSON.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i) + 1
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && bytes.IndexByte([]byte(",}] \t\n\r"), b[i]) < 0 {
		i++
	}
	return i
}

// stringEnd returns the index of the quote that closes the string that
// starts at b[start] in valid JSON.
func stringEnd(b []byte, start int) int {
	i := start + 1
	for {
		i += bytes.IndexByte(b[i:], '"')
		esc := 0
		for b[i-1-esc] == '\\' {
			esc++
		}
		if esc%2 == 0 {
			return i
		}
		i++
	}
}

// isName reports whether the string that ends at b[end] is a member name:
// the next byte that is not whitespace is a colon.
func isName(b []byte, end int) bool {
	for i := end + 1; i < len(b); i++ {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
		case ':':
			return true
		default:
			return false
		}
	}
	return false
}

// decodeName returns the quoted name q decoded; most names have no
// escapes and are their own bytes.
func decodeName(q []byte) []byte {
	if bytes.IndexByte(q, '\\') < 0 {
		return q[1 : len(q)-1]
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return q
	}
	return []byte(s)
}

// openObject is an object open at one point of DuplicateMember's scan:
// its names are names[start:] of the scan's names (innermost object
// last). A small object's names are compared one by one; an object of
// more than smallObject names gets a set.
type openObject struct {
	start int // the object's first name in names
	set   map[string]struct{}
}

const smallObject = 16

// addName adds the quoted name q to o, the innermost object, whose names
// are names[o.start:] unless it has a set; it returns names and whether
// the name was there already.
func addName(names [][]byte, o *openObject, q []byte) ([][]byte, bool) {
	name := decodeName(q)
	if o.set != nil {
		if _, ok := o.set[string(name)]; ok {
			return names, true
		}
		o.set[string(name)] = struct{}{}
		return names, false
	}
	for _, n := range names[o.start:] {
		if bytes.Equal(n, name) {
			return names, true
		}
	}
	names = append(names, name)
	if len(names)-o.start > smallObject {
		o.set = make(map[string]struct{}, 2*smallObject)
		for _, n := range names[o.start:] {
			o.set[string(n)] = struct{}{}
		}
		names = names[:o.start]
	}
	return names, false
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
// is. It may say false of such a value (nesting deeper than
// MaxScanDepth); it never says true of another.
func compactJSON(b []byte) bool {
	end, spaced, ok := ScanValue(b, 0)
	return ok && !spaced && end == len(b)
}

// ScanValue reads the JSON value that starts at b[i] (no space before
// it) as encoding/json's scanner does, and returns where it ends and
// whether it holds insignificant spaces. ok is false where encoding/json
// would refuse the value, and also for values nested deeper than
// MaxScanDepth, which it might accept: a caller then leaves the value to
// encoding/json. It allocates nothing, for the hot paths that read
// values before they are stored or answered (CompactValue, the PUT body).
func ScanValue(b []byte, i int) (end int, spaced, ok bool) {
	s := valueScan{b: b}
	end, ok = s.value(i, 0)
	return end, s.spaced, ok
}

// valueScan is ScanValue's state: the text and whether a space was
// skipped.
type valueScan struct {
	b      []byte
	spaced bool
}

func (s *valueScan) space(i int) int {
	j := skipSpace(s.b, i)
	if j != i {
		s.spaced = true
	}
	return j
}

func (s *valueScan) value(i, depth int) (int, bool) {
	b := s.b
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '{' || c == '[':
		if depth >= MaxScanDepth {
			return i, false
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		if i = s.space(i + 1); i < len(b) && b[i] == end {
			return i + 1, true
		}
		for {
			var ok bool
			if c == '{' {
				if i, ok = scanString(b, i); !ok {
					return i, false
				}
				if i = s.space(i); i >= len(b) || b[i] != ':' {
					return i, false
				}
				i = s.space(i + 1)
			}
			if i, ok = s.value(i, depth+1); !ok {
				return i, false
			}
			if i = s.space(i); i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = s.space(i + 1)
			case end:
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '"':
		return scanString(b, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	}
	return i, false
}

func scanLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// scanString reads a string as json.Compact's scanner does: escapes
// checked, control characters refused, other bytes passed (invalid UTF-8
// included: CompactValue refuses it after).
func scanString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			if i++; i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i <= 4 {
					return i, false
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

// scanNumber reads a number in JSON's grammar.
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b) || b[i] < '0' || b[i] > '9':
		return i, false
	case b[i] == '0':
		i++
	default:
		i = digitsEnd(b, i)
	}
	if i < len(b) && b[i] == '.' {
		j := digitsEnd(b, i+1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digitsEnd(b, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

func digitsEnd(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
