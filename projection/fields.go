package projection

import (
	"bytes"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
)

// The indexed fields of a value (kv_fields) are those kv_value_fields
// (schemas/postgres/00004_kv_fields.sql) derives from value::jsonb. Apply
// derives them in Go instead (valueFields), from the value it writes, and
// passes them to writeFields as arrays: parsing each value into jsonb and
// walking it with jsonb_each was most of the statement's time (figure
// 18a). What depends on Postgres's types stays in SQL: a number is passed
// as its literal and becomes numeric there (so 1e3, -0 and 1.50 are what
// jsonb makes of them), and the cap on its written-out length is checked
// on that numeric. Where the Go derivation could differ from Postgres's,
// it does not guess: the key falls back to kv_value_fields in the same
// statement (see valueFields).

// valueField is one indexed-field candidate of a value: a top-level
// member of an object whose value is a scalar, with a name and a string
// within the caps. Numbers are checked against their cap in SQL.
type valueField struct {
	name string
	typ  byte   // 'n', 's', 'b' or 'z', as kv_fields.type
	num  string // the number's literal, for 'n'
	str  string // the string, "true"/"false" or "" (null); unused for 'n'
}

// maxFieldDepth bounds the nesting valueFields follows; deeper values fall
// back to Postgres, whose own limit is its stack.
const maxFieldDepth = 256

// valueFields returns the indexed-field candidates of the JSON value v in
// field order (bytewise: COLLATE "C"), or ok false when the key must fall
// back to kv_value_fields. It writes them in dst's room (dst[:0]), and
// their names, numbers and strings are v's own text where v has them
// unescaped: a batch's values cost no allocation per field (Apply reuses
// dst). It agrees with kv_value_fields of v::jsonb:
//
//   - only when v is an object; any other JSON value has no fields;
//   - members named twice: the last one counts (jsonb keeps the last);
//   - names and strings unescaped as jsonb does (\uXXXX, surrogate
//     pairs), compared with the caps in UTF-8 bytes;
//   - strings, numbers, booleans and null are candidates, objects and
//     arrays are not.
//
// It returns ok false, leaving the decision to Postgres, for anything it
// does not mirror exactly: text that is not JSON as Postgres reads it
// (Postgres raises the error), the escapes jsonb refuses (\u0000, an
// unpaired surrogate: ditto), numbers that are not a top-level member's
// (a huge exponent in them could make jsonb fail), nesting beyond
// maxFieldDepth, and more than MaxFilterFields candidates (which
// of them are kept depends on the numbers' cap, applied in SQL).
func valueFields(v string, dst []valueField) (fields []valueField, ok bool) {
	p := fieldParser{v: v}
	// The scanner only reads the bytes, which are v's: no copy.
	p.sc.Reset(unsafe.Slice(unsafe.StringData(v), len(v)))
	if p.sc.Peek() == '{' {
		fields, ok = p.object(dst[:0])
	} else {
		ok = p.value(0)
	}
	p.sc.Peek()
	if !ok || p.sc.Offset() != len(v) {
		return nil, false
	}
	if len(fields) > 1 {
		// Sort by name, stably so that the last of equal names follows
		// the others, then keep the last of each run.
		slices.SortStableFunc(fields, func(a, b valueField) int { return strings.Compare(a.name, b.name) })
		out := fields[:0]
		for i := range fields {
			if i+1 < len(fields) && fields[i+1].name == fields[i].name {
				continue
			}
			out = append(out, fields[i])
		}
		fields = out
	}
	// Drop what the caps exclude, after the duplicates are resolved: a
	// later nested or too long member hides an earlier scalar.
	out := fields[:0]
	for _, f := range fields {
		if f.typ != 0 && len(f.name) <= contract.MaxFieldNameBytes &&
			(f.typ == 'n' || len(f.str) <= contract.MaxFieldStringBytes) {
			out = append(out, f)
		}
	}
	if len(out) > MaxFilterFields {
		return nil, false
	}
	return out, true
}

// fieldParser reads JSON as Postgres's parser accepts it (RFC 8259), and
// reports anything else as not ok. The scanner checks the tokens' syntax
// (what follows a number or a literal must be a delimiter there, as in
// Postgres's lexer, or the text is refused); fieldParser decides what
// jsonb would refuse in them and how deep to follow.
type fieldParser struct {
	v  string
	sc codec.Scanner
}

// object reads the top-level object ('{' next) and returns every member,
// in order; a member whose value is not a scalar has typ 0.
func (p *fieldParser) object(fields []valueField) ([]valueField, bool) {
	sc := &p.sc
	sc.Next('{')
	if sc.Next('}') {
		return fields, true
	}
	for {
		name, ok := p.str()
		if !ok || !sc.Next(':') {
			return nil, false
		}
		f := valueField{name: name}
		switch c := sc.Peek(); {
		case c == '"':
			if f.str, ok = p.str(); !ok {
				return nil, false
			}
			f.typ = 's'
		case c == '-' || c >= '0' && c <= '9':
			num, err := sc.ReadNumber()
			if err != nil {
				return nil, false
			}
			f.typ, f.num = 'n', p.sub(num)
		case c == 't' || c == 'f':
			f.typ, f.str = 'b', "true"
			if c == 'f' {
				f.str = "false"
			}
			if sc.ReadLiteral(f.str) != nil {
				return nil, false
			}
		case c == 'n':
			f.typ = 'z'
			if sc.ReadLiteral("null") != nil {
				return nil, false
			}
		default:
			if !p.value(1) {
				return nil, false
			}
		}
		fields = append(fields, f)
		if sc.Next(',') {
			continue
		}
		if sc.Next('}') {
			return fields, true
		}
		return nil, false
	}
}

// sub returns the bytes b of the text as the substring of v they are.
func (p *fieldParser) sub(b []byte) string {
	end := p.sc.Offset()
	return p.v[end-len(b) : end]
}

// value checks the value next, at nesting depth, and skips it. A number
// is accepted only when plain (no exponent, not long): it is not passed
// to Postgres, which would refuse one beyond numeric's range.
func (p *fieldParser) value(depth int) bool {
	if depth > maxFieldDepth {
		return false
	}
	sc := &p.sc
	switch c := sc.Peek(); {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '-' || c >= '0' && c <= '9':
		num, err := sc.ReadNumber()
		return err == nil && len(num) <= 300 && !bytes.ContainsAny(num, "eE")
	case c == 't':
		return sc.ReadLiteral("true") == nil
	case c == 'f':
		return sc.ReadLiteral("false") == nil
	case c == 'n':
		return sc.ReadLiteral("null") == nil
	case c == '{' || c == '[':
		return p.composite(depth)
	}
	return false
}

// composite checks the object or array next and skips it.
func (p *fieldParser) composite(depth int) bool {
	sc := &p.sc
	open, closer := sc.Peek(), byte('}')
	if open == '[' {
		closer = ']'
	}
	sc.Next(open)
	if sc.Next(closer) {
		return true
	}
	for {
		if open == '{' {
			if _, ok := p.str(); !ok || !sc.Next(':') {
				return false
			}
		}
		if !p.value(depth + 1) {
			return false
		}
		if sc.Next(',') {
			continue
		}
		return sc.Next(closer)
	}
}

// str reads the string next and returns it unescaped, as jsonb stores
// it; not ok for what jsonb refuses: a control character, an unknown
// escape, \u0000, an unpaired surrogate, invalid UTF-8. A string without
// escapes is v's own text.
func (p *fieldParser) str() (string, bool) {
	raw, plain, err := p.sc.ReadString()
	switch {
	case err != nil:
		return "", false
	case plain:
		end := p.sc.Offset() - 1 // the closing quote
		return p.v[end-len(raw) : end], true
	}
	return unescape(raw)
}

// unescape returns the string the checked string bytes s (between the
// quotes) stand for, or not ok for what jsonb refuses.
func unescape(s []byte) (string, bool) {
	out := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := codec.Hex4(s[i+2 : i+6])
			switch {
			case r == 0: // \u0000: jsonb refuses it
				return "", false
			case utf16.IsSurrogate(r):
				if r >= 0xdc00 { // a low surrogate first
					return "", false
				}
				lo := rune(-1)
				if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
					lo = codec.Hex4(s[i+8 : i+12])
				}
				if lo < 0xdc00 || lo > 0xdfff {
					return "", false
				}
				out = utf8.AppendRune(out, utf16.DecodeRune(r, lo))
				i += 6
			default:
				out = utf8.AppendRune(out, r)
			}
			i += 4
		}
		i += 2
	}
	if !utf8.Valid(out) {
		return "", false
	}
	return string(out), true
}
