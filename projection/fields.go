package projection

import (
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

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
// maxFieldDepth, and more than contract.MaxFilterFields candidates (which
// of them are kept depends on the numbers' cap, applied in SQL).
func valueFields(v string, dst []valueField) (fields []valueField, ok bool) {
	p := fieldParser{b: v}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '{' {
		fields, ok = p.object(dst[:0])
	} else {
		ok = p.value(0)
	}
	p.space()
	if !ok || p.i != len(p.b) {
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
	if len(out) > contract.MaxFilterFields {
		return nil, false
	}
	return out, true
}

// fieldParser reads JSON as Postgres's parser accepts it (RFC 8259), and
// reports anything else as not ok.
type fieldParser struct {
	b string
	i int
}

func (p *fieldParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// object reads the top-level object at p.i ('{' next) and returns every
// member, in order; a member whose value is not a scalar has typ 0.
func (p *fieldParser) object(fields []valueField) ([]valueField, bool) {
	p.i++
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return fields, true
	}
	for {
		p.space()
		name, ok := p.str()
		if !ok {
			return nil, false
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.space()
		if p.i >= len(p.b) {
			return nil, false
		}
		f := valueField{name: name}
		switch c := p.b[p.i]; {
		case c == '"':
			if f.str, ok = p.str(); !ok {
				return nil, false
			}
			f.typ = 's'
		case c == '-' || c >= '0' && c <= '9':
			start := p.i
			if !p.number() {
				return nil, false
			}
			f.typ, f.num = 'n', p.b[start:p.i]
		case c == 't' || c == 'f':
			f.typ, f.str = 'b', "true"
			if c == 'f' {
				f.str = "false"
			}
			if !p.literal(f.str) {
				return nil, false
			}
		case c == 'n':
			f.typ = 'z'
			if !p.literal("null") {
				return nil, false
			}
		default:
			if !p.value(1) {
				return nil, false
			}
		}
		fields = append(fields, f)
		p.space()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return fields, true
		default:
			return nil, false
		}
	}
}

// value checks the value at p.i, at nesting depth, and skips it. A number
// is accepted only when plain (no exponent, not long): it is not passed
// to Postgres, which would refuse one beyond numeric's range.
func (p *fieldParser) value(depth int) bool {
	if p.i >= len(p.b) || depth > maxFieldDepth {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '-' || c >= '0' && c <= '9':
		start := p.i
		return p.number() && p.i-start <= 300 && !strings.ContainsAny(p.b[start:p.i], "eE")
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '{' || c == '[':
		return p.composite(depth)
	}
	return false
}

// composite checks the object or array at p.i and skips it.
func (p *fieldParser) composite(depth int) bool {
	closer := byte('}')
	if p.b[p.i] == '[' {
		closer = ']'
	}
	p.i++
	p.space()
	if p.i < len(p.b) && p.b[p.i] == closer {
		p.i++
		return true
	}
	for {
		p.space()
		if closer == '}' {
			if _, ok := p.str(); !ok {
				return false
			}
			p.space()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return false
			}
			p.i++
			p.space()
		}
		if !p.value(depth + 1) {
			return false
		}
		p.space()
		if p.i >= len(p.b) {
			return false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case closer:
			p.i++
			return true
		default:
			return false
		}
	}
}

func (p *fieldParser) literal(lit string) bool {
	if p.b[p.i:min(len(p.b), p.i+len(lit))] != lit {
		return false
	}
	p.i += len(lit)
	// Postgres reads a token up to the next delimiter: "truex" is one
	// (invalid) token, not true then x.
	return p.i == len(p.b) || !isTokenByte(p.b[p.i])
}

// number skips a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *fieldParser) number() bool {
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.digits() == 0:
		return false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return false
		}
	}
	return p.i == len(p.b) || !isTokenByte(p.b[p.i])
}

func (p *fieldParser) digits() int {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// isTokenByte reports a byte that would continue a number or a literal
// in Postgres's lexer (anything but JSON's delimiters and whitespace).
func isTokenByte(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ':', '[', ']', '{', '}', '"':
		return false
	}
	return true
}

// str reads the string at p.i ('"' expected) and returns it unescaped,
// as jsonb stores it; not ok for what jsonb refuses: a control character,
// an unknown escape, \u0000, an unpaired surrogate, invalid UTF-8.
func (p *fieldParser) str() (string, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	p.i++
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !utf8.ValidString(s) {
				return "", false
			}
			return s, true
		case c == '\\':
			return p.unescape(start)
		case c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// unescape reads the rest of a string with escapes; b[start:p.i] is its
// plain beginning and p.i is at the first backslash.
func (p *fieldParser) unescape(start int) (string, bool) {
	out := make([]byte, 0, 2*(p.i-start)+16)
	out = append(out, p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		switch e := p.b[p.i+1]; e {
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
			r := codec.Hex4(p.b[p.i+2:])
			switch {
			case r <= 0: // \u0000 (jsonb refuses it) or not four hex digits
				return "", false
			case utf16.IsSurrogate(r):
				if r >= 0xdc00 { // a low surrogate first
					return "", false
				}
				lo := rune(-1)
				if p.i+12 <= len(p.b) && p.b[p.i+6] == '\\' && p.b[p.i+7] == 'u' {
					lo = codec.Hex4(p.b[p.i+8:])
				}
				if lo < 0xdc00 || lo > 0xdfff {
					return "", false
				}
				out = utf8.AppendRune(out, utf16.DecodeRune(r, lo))
				p.i += 6
			default:
				out = utf8.AppendRune(out, r)
			}
			p.i += 4
		default:
			return "", false
		}
		p.i += 2
	}
	return "", false
}
