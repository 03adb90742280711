package audit

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/eskv/eskv/codec"
)

// CanonicalExact returns the scheme-2 canonical form of the JSON value raw
// (docs/audit.md, "Hash schemes"): RFC 8785's member order, whitespace and
// string escaping, but every number written from its exact decimal value
// instead of the nearest IEEE 754 double, so two numbers share a form only
// when they are the same number. An absent value (nil or empty) is JSON
// null. ok is false when raw has no such form (not one JSON value,
// duplicate member names, invalid UTF-8, an exponent beyond ±999999999,
// nesting deeper than maxCanonicalDepth), and then the returned bytes are
// nonCanonicalPrefix and raw, which no canonical form starts with.
//
// The map is injective: the form parses back to the value it came from,
// member for member and digit for digit. Numbers are compared by sign and
// exact decimal value: 1, 1.0, 10e-1 and 0.1e1 are one number; 0 and -0
// are two (IEEE 754 readers tell them apart), and so are 0 and 1e-400, and
// 2^53 and 2^53+1.
func CanonicalExact(raw []byte) (b []byte, ok bool) {
	var c canonicalizer
	return c.appendExact(make([]byte, 0, len(raw)+8), raw)
}

// appendExact appends CanonicalExact(raw) to dst, with c's scratch
// buffers: a canonicalizer kept from value to value canonicalizes
// without allocating.
func (c *canonicalizer) appendExact(dst, raw []byte) (b []byte, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return append(dst, "null"...), true
	}
	start := len(dst)
	c.sc.Reset(raw)
	c.out = dst
	c.members, c.units = c.members[:0], c.units[:0]
	ok = c.value(0) == nil && c.sc.Peek() == 0 && c.sc.Offset() == len(raw)
	b, c.out = c.out, nil
	c.sc.Reset(nil)
	if !ok {
		return append(append(b[:start], nonCanonicalPrefix...), raw...), false
	}
	return b, true
}

// maxCanonicalDepth bounds the nesting of arrays and objects that
// CanonicalExact canonicalizes; deeper values hash as their bytes.
const maxCanonicalDepth = 10000

// maxExponentDigits bounds the significant digits of a number's exponent.
const maxExponentDigits = 9

var errNoCanonicalForm = errors.New("no canonical form")

// canonicalizer is a recursive-descent parser of one JSON value that
// writes its canonical form to out as it goes; codec's scanner reads the
// tokens, and the canonicalizer decides what they stand for exactly (a
// string's code points, an unpaired surrogate included; a number's
// digits). Its scratch buffers are kept from value to value.
type canonicalizer struct {
	sc  codec.Scanner
	out []byte

	runes   []rune   // the code points of the string str parsed last
	units   []uint16 // the names of members (members[i].units), a stack
	members []member // the members of the objects being parsed, a stack
	num     []byte   // the digits of the number being parsed
	tmp     []byte   // an object's members while they are reordered
}

func (c *canonicalizer) value(depth int) error {
	if depth > maxCanonicalDepth {
		return errNoCanonicalForm
	}
	switch ch := c.sc.Peek(); {
	case ch == '{':
		return c.object(depth + 1)
	case ch == '[':
		return c.array(depth + 1)
	case ch == '"':
		if err := c.str(); err != nil {
			return err
		}
		c.out = appendExactString(c.out, c.runes)
		return nil
	case ch == '-' || (ch >= '0' && ch <= '9'):
		return c.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if c.sc.Peek() == lit[0] {
			if c.sc.ReadLiteral(lit) != nil {
				return errNoCanonicalForm
			}
			c.out = append(c.out, lit...)
			return nil
		}
	}
	return errNoCanonicalForm
}

func (c *canonicalizer) array(depth int) error {
	c.sc.Next('[')
	c.out = append(c.out, '[')
	if c.sc.Next(']') {
		c.out = append(c.out, ']')
		return nil
	}
	for {
		if err := c.value(depth); err != nil {
			return err
		}
		switch {
		case c.sc.Next(','):
			c.out = append(c.out, ',')
		case c.sc.Next(']'):
			c.out = append(c.out, ']')
			return nil
		default:
			return errNoCanonicalForm
		}
	}
}

// member is one object member: its name as UTF-16 code units (RFC 8785
// sorts by them), c.units[u0:u1], and its canonical name, ':' and value,
// c.out[start:end].
type member struct {
	u0, u1     int
	start, end int
}

// object writes the members of the object at c.i as they come, then
// reorders them when their names are not in order already.
func (c *canonicalizer) object(depth int) error {
	c.sc.Next('{')
	if c.sc.Next('}') {
		c.out = append(c.out, "{}"...)
		return nil
	}
	open, base, ubase := len(c.out), len(c.members), len(c.units)
	c.out = append(c.out, '{')
	for {
		if len(c.members) > base {
			c.out = append(c.out, ',')
		}
		m := member{u0: len(c.units), start: len(c.out)}
		if err := c.str(); err != nil {
			return err
		}
		c.units = appendUTF16(c.units, c.runes)
		c.out = appendExactString(c.out, c.runes)
		m.u1 = len(c.units)
		if !c.sc.Next(':') {
			return errNoCanonicalForm
		}
		c.out = append(c.out, ':')
		if err := c.value(depth); err != nil {
			return err
		}
		m.end = len(c.out)
		c.members = append(c.members, m)
		if c.sc.Next('}') {
			break
		}
		if !c.sc.Next(',') {
			return errNoCanonicalForm
		}
	}
	if err := c.order(open, c.members[base:]); err != nil {
		return err
	}
	c.members, c.units = c.members[:base], c.units[:ubase]
	c.out = append(c.out, '}')
	return nil
}

// order puts the members ms of the object written from c.out[open] in
// the order of their names' UTF-16 code units; two members of one name
// have no canonical form.
func (c *canonicalizer) order(open int, ms []member) error {
	cmp := func(a, b member) int { return slices.Compare(c.units[a.u0:a.u1], c.units[b.u0:b.u1]) }
	sorted := true
	for i := 1; i < len(ms) && sorted; i++ {
		sorted = cmp(ms[i-1], ms[i]) < 0
	}
	if sorted {
		return nil
	}
	slices.SortFunc(ms, cmp)
	for i := 1; i < len(ms); i++ {
		if cmp(ms[i-1], ms[i]) == 0 {
			return errNoCanonicalForm // a duplicate member name
		}
	}
	c.tmp = append(c.tmp[:0], c.out[open:]...)
	c.out = c.out[:open+1] // {
	for i, m := range ms {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, c.tmp[m.start-open:m.end-open]...)
	}
	return nil
}

// str reads the string next into its code points, c.runes; an escaped
// UTF-16 surrogate that is not half of a pair stays a code point of its
// own in 0xD800-0xDFFF (never U+FFFD, which is another string).
func (c *canonicalizer) str() error {
	raw, _, err := c.sc.ReadString()
	if err != nil {
		return errNoCanonicalForm
	}
	c.runes = c.runes[:0]
	for i := 0; i < len(raw); {
		switch ch := raw[i]; {
		case ch == '\\':
			r, n := escapeAt(raw, i)
			c.runes = append(c.runes, r)
			i += n
		case ch < utf8.RuneSelf:
			c.runes = append(c.runes, rune(ch))
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				return errNoCanonicalForm
			}
			c.runes = append(c.runes, r)
			i += size
		}
	}
	return nil
}

// escapeAt returns the code point of the escape at s[i] in a string the
// scanner checked, and its length (a surrogate pair of \u escapes is one
// code point).
func escapeAt(s []byte, i int) (rune, int) {
	switch e := s[i+1]; e {
	case '"', '\\', '/':
		return rune(e), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	}
	r := codec.Hex4(s[i+2 : i+6])
	if utf16.IsSurrogate(r) && r < 0xdc00 && i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
		if pair := utf16.DecodeRune(r, codec.Hex4(s[i+8:i+12])); pair != utf8.RuneError {
			return pair, 12
		}
	}
	return r, 6
}

// number parses the number at c.i and writes it from its exact decimal
// value: sign, the significant digits d (no leading or trailing zero)
// and the exponent n with value = 0.d × 10^n, laid out as ECMAScript's
// Number::toString lays out a double's shortest digits (plain for
// 1e-7 <= |x| < 1e21, else d[.ddd]e±x). Zero is 0 or -0.
func (c *canonicalizer) number() error {
	num, err := c.sc.ReadNumber()
	if err != nil {
		return errNoCanonicalForm
	}
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	intPart, rest := splitDigits(num)
	var frac []byte
	if len(rest) > 0 && rest[0] == '.' {
		frac, rest = splitDigits(rest[1:])
	}
	exp := 0
	if len(rest) > 0 { // e or E, the scanner checked the grammar
		rest = rest[1:]
		expNeg := rest[0] == '-'
		if rest[0] == '+' || rest[0] == '-' {
			rest = rest[1:]
		}
		e := bytes.TrimLeft(rest, "0")
		if len(e) > maxExponentDigits {
			return errNoCanonicalForm
		}
		for _, d := range e {
			exp = exp*10 + int(d-'0')
		}
		if expNeg {
			exp = -exp
		}
	}
	c.num = append(append(c.num[:0], intPart...), frac...)
	d := bytes.TrimLeft(c.num, "0")
	if neg {
		c.out = append(c.out, '-')
	}
	if len(d) == 0 {
		c.out = append(c.out, '0')
		return nil
	}
	trimmed := bytes.TrimRight(d, "0")
	n := len(intPart) - (len(intPart) + len(frac) - len(d)) + exp // digits before the point
	c.out = appendDecimal(c.out, trimmed, n)
	return nil
}

// splitDigits splits b after its leading run of ASCII digits.
func splitDigits(b []byte) (digits, rest []byte) {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return b[:i], b[i:]
}

// appendDecimal appends 0.d × 10^n (d: significant digits without leading
// or trailing zeros) in ECMAScript's Number::toString layout.
func appendDecimal(b, d []byte, n int) []byte {
	k := len(d)
	switch {
	case k <= n && n <= 21:
		b = append(b, d...)
		for range n - k {
			b = append(b, '0')
		}
	case 0 < n && n <= 21:
		b = append(b, d[:n]...)
		b = append(b, '.')
		b = append(b, d[n:]...)
	case -6 < n && n <= 0:
		b = append(b, '0', '.')
		for range -n {
			b = append(b, '0')
		}
		b = append(b, d...)
	default:
		b = append(b, d[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, d[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b
}

// appendExactString appends s as an RFC 8785 string; a lone surrogate
// code point is written as a lowercase \u escape.
func appendExactString(b []byte, s []rune) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b = appendJCSByte(b, byte(r))
		case utf16.IsSurrogate(r):
			b = append(b, '\\', 'u', hexDigits[r>>12], hexDigits[(r>>8)&0xf], hexDigits[(r>>4)&0xf], hexDigits[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// appendUTF16 appends s as UTF-16 code units, lone surrogates as
// themselves.
func appendUTF16(u []uint16, s []rune) []uint16 {
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			u = append(u, uint16(hi), uint16(lo))
		} else {
			u = append(u, uint16(r))
		}
	}
	return u
}
