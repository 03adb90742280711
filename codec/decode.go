package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/eskv/eskv/contract"
)

// The event's JSON is read here without reflection: encoding/json's
// reflection was 11–23 % of the projector's and the auditor's CPU
// (docs/performance.md). The result is the one json.Decoder.Decode gives
// for every input, with its lenient rules (codec_test.go fuzzes the two
// against each other): members matched by name, exact or else ignoring
// case; unknown members skipped, but still checked for syntax; a null
// leaves a field as it is, except pointers and values (nil and "null");
// a repeated member decodes again into the same field; strings with
// invalid UTF-8 or lone surrogates read with U+FFFD; and, like the
// Decoder, what follows the event's object is not read.

// maxDepth is encoding/json's nesting limit of arrays and objects.
const maxDepth = 10000

// scanner reads JSON from b at i: it is the package's one reader of JSON
// text, under the event decoder, ScanValue, Members and Elements. depth
// is the nesting of arrays and objects at i, and limit the deepest it
// reads (0: encoding/json's maxDepth); spaced records whether whitespace
// was skipped (scanCompact); odd whether the event read says as JSON
// anything its encoding would not say (UnmarshalRecord).
type scanner struct {
	b      []byte
	i      int
	depth  int
	limit  int
	spaced bool
	odd    bool
}

// deeper enters an array or object, and reports whether that is deeper
// than the scanner reads.
func (s *scanner) deeper() bool {
	s.depth++
	return s.depth > maxDepth || (s.limit > 0 && s.depth > s.limit)
}

var (
	errEOF   = io.ErrUnexpectedEOF
	errDepth = errors.New("exceeded max depth")
)

// errAt reports the byte at s.i as unexpected (what says where), or the
// end of the input.
func (s *scanner) errAt(what string) error {
	if s.i >= len(s.b) {
		return errEOF
	}
	return fmt.Errorf("invalid character %q %s at offset %d", s.b[s.i], what, s.i)
}

// ws skips whitespace.
func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
			s.spaced = true
		default:
			return
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// value skips whitespace and returns where the next value starts.
func (s *scanner) value() int {
	s.ws()
	return s.i
}

// peek skips whitespace and returns the next byte, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// expect skips whitespace and consumes c.
func (s *scanner) expect(c byte, what string) error {
	if s.peek() != c {
		return s.errAt(what)
	}
	s.i++
	return nil
}

// skipValue skips whitespace and one value, checking its syntax as
// encoding/json's scanner does.
func (s *scanner) skipValue() error {
	switch c := s.peek(); {
	case c == '{' || c == '[':
		return s.skipComposite(c)
	case c == '"':
		_, _, err := s.str()
		return err
	case c == '-' || '0' <= c && c <= '9':
		_, err := s.number()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.errAt("looking for beginning of value")
}

// skipComposite skips the object or array at s.i (open next), as members
// and elements read them; written out to skip without a closure per
// value.
func (s *scanner) skipComposite(open byte) error {
	closing := byte(']')
	if open == '{' {
		closing = '}'
	}
	s.i++
	if s.deeper() {
		return errDepth
	}
	if s.peek() == closing {
		s.i++
		s.depth--
		return nil
	}
	for {
		if open == '{' {
			if s.peek() != '"' {
				return s.errAt("looking for beginning of object key string")
			}
			if _, _, err := s.str(); err != nil {
				return err
			}
			if err := s.expect(':', "after object key"); err != nil {
				return err
			}
		}
		if err := s.skipValue(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case closing:
			s.i++
			s.depth--
			return nil
		default:
			return s.errAt("after object or array element")
		}
	}
}

// members reads an object at s.i ('{' next), calling member before each
// member's value with its unquoted name.
func (s *scanner) members(member func(name []byte) error) error {
	if err := s.expect('{', "looking for beginning of object"); err != nil {
		return err
	}
	if s.deeper() {
		return errDepth
	}
	if s.peek() == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.errAt("looking for beginning of object key string")
		}
		raw, plain, err := s.str()
		if err != nil {
			return err
		}
		name := raw
		if !plain {
			name = s.unquote(raw)
		}
		if err := s.expect(':', "after object key"); err != nil {
			return err
		}
		if err := member(name); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.errAt("after object key:value pair")
		}
	}
}

// elements reads an array at s.i ('[' next), calling element before
// each element.
func (s *scanner) elements(element func() error) error {
	if err := s.expect('[', "looking for beginning of array"); err != nil {
		return err
	}
	if s.deeper() {
		return errDepth
	}
	if s.peek() == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := element(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.errAt("after array element")
		}
	}
}

func (s *scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		for j := 0; j < len(lit); j++ {
			if s.i+j >= len(s.b) || s.b[s.i+j] != lit[j] {
				s.i += j
				return s.errAt("in literal " + lit)
			}
		}
	}
	s.i += len(lit)
	return nil
}

// number reads a number at s.i and returns its bytes.
func (s *scanner) number() ([]byte, error) {
	start := s.i
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && '1' <= s.b[s.i] && s.b[s.i] <= '9':
		s.digits()
	default:
		return nil, s.errAt("in numeric literal")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return nil, s.errAt("after decimal point in numeric literal")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return nil, s.errAt("in exponent of numeric literal")
		}
	}
	return s.b[start:s.i], nil
}

func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// str reads a string at s.i ('"' next) and returns its bytes between the
// quotes; plain when they need no unquoting (no escape, valid UTF-8).
func (s *scanner) str() (raw []byte, plain bool, err error) {
	s.i++
	start := s.i
	plain = true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], plain, nil
		case c < 0x20:
			return nil, false, s.errAt("in string literal")
		case c == '\\':
			plain = false
			if err := s.escape(); err != nil {
				return nil, false, err
			}
			continue
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size == 1 {
				plain, s.odd = false, true
			}
			s.i += size
			continue
		}
		s.i++
	}
	return nil, false, errEOF
}

// escape checks the escape sequence at s.i ('\\' next) and skips it.
func (s *scanner) escape() error {
	s.i++
	if s.i >= len(s.b) {
		return errEOF
	}
	switch s.b[s.i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i++
		return nil
	case 'u':
		s.i++
		for range 4 {
			if s.i >= len(s.b) {
				return errEOF
			}
			if c := s.b[s.i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return s.errAt("in \\u hexadecimal character escape")
			}
			s.i++
		}
		return nil
	}
	return s.errAt("in string escape code")
}

// unquote returns the string a checked string's bytes (between the
// quotes) stand for, as encoding/json's unquoteBytes does: escapes
// resolved, invalid UTF-8 and unpaired surrogates as U+FFFD.
func (sc *scanner) unquote(s []byte) []byte {
	b := make([]byte, 0, len(s)+2*utf8.UTFMax)
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\' && s[r+1] == 'u':
			rr := getu4(s[r:])
			r += 6
			if utf16.IsSurrogate(rr) {
				if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
					b = utf8.AppendRune(b, dec)
					r += 6
					break
				}
				rr, sc.odd = unicode.ReplacementChar, true
			}
			b = utf8.AppendRune(b, rr)
		case c == '\\':
			b = append(b, unescaped[s[r+1]])
			r += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			b = utf8.AppendRune(b, rr)
			r += size
		}
	}
	return b
}

// unescaped maps the letter of a short escape to its byte.
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	return Hex4(s[2:])
}

// Hex4 decodes the four hexadecimal digits at the start of b (a JSON
// \u escape's), or returns -1.
func Hex4[T ~string | ~[]byte](b T) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for i := range 4 {
		c := b[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// A typeError is a JSON value of the wrong type for its field, which
// encoding/json reports as an *UnmarshalTypeError.
func typeError(value byte, field string) error {
	return fmt.Errorf("cannot unmarshal a value starting with %q into %s", value, field)
}

// isNull consumes a null at s.i if there is one.
func (s *scanner) isNull() (bool, error) {
	if s.peek() != 'n' {
		return false, nil
	}
	return true, s.literal("null")
}

// null consumes the null at s.i, which leaves a field as it is, so the
// event's encoding would say otherwise.
func (s *scanner) null() error {
	s.odd = true
	return s.literal("null")
}

// stringField reads a string into *dst; null leaves it.
func (s *scanner) stringField(dst *string, field string) error {
	switch c := s.peek(); c {
	case 'n':
		return s.null()
	case '"':
		raw, plain, err := s.str()
		if err != nil {
			return err
		}
		if !plain {
			raw = s.unquote(raw)
		}
		*dst = string(raw)
		return nil
	default:
		return typeError(c, field)
	}
}

// knownField is stringField for a field whose values are mostly among
// known: a known value is set to the constant instead of a copy of its
// bytes (an allocation for every event's kind, op and purpose).
func (s *scanner) knownField(dst *string, field string) error {
	raw, ok, err := s.plainString()
	if !ok || err != nil {
		return s.stringField(dst, field)
	}
	if k, ok := known[string(raw)]; ok {
		*dst = k
	} else {
		*dst = string(raw)
	}
	return nil
}

// sharedField is stringField for a field whose value is mostly a prefix
// of from: such a value is set to from's prefix instead of a copy.
func (s *scanner) sharedField(dst *string, from, field string) error {
	raw, ok, err := s.plainString()
	if !ok || err != nil {
		return s.stringField(dst, field)
	}
	if len(raw) <= len(from) && from[:len(raw)] == string(raw) {
		*dst = from[:len(raw)]
	} else {
		*dst = string(raw)
	}
	return nil
}

// plainString reads the string at s.i when it has no escapes (its bytes
// are its value); otherwise, or when no string is next, it reads nothing
// and ok is false.
func (s *scanner) plainString() (raw []byte, ok bool, err error) {
	if s.peek() != '"' {
		return nil, false, nil
	}
	start := s.i
	raw, plain, err := s.str()
	if err != nil || !plain {
		s.i = start
		return nil, false, nil
	}
	return raw, true, nil
}

// known holds the values of Event.Kind, Event.Op and Semantics.Purpose
// (knownField). The event ops are the contract's op table (contract.Ops),
// so a new op is interned without a change here, and a transaction's
// op, which the table does not hold (it is no request of one key).
var known = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []contract.Kind{contract.KindPut, contract.KindDelete, contract.KindExpire} {
		m[string(k)] = string(k)
	}
	for _, op := range append(contract.Ops(), contract.OpTxn) {
		m[string(op)] = string(op)
	}
	for _, p := range contract.Purposes {
		m[p] = p
	}
	return m
}()

// intField reads an integer into *dst as encoding/json does (a number
// with a fraction or an exponent, or out of range, is an error); null
// leaves it.
func (s *scanner) intField(dst *int64, field string) error {
	c := s.peek()
	if c == 'n' {
		return s.null()
	}
	if c != '-' && (c < '0' || c > '9') {
		return typeError(c, field)
	}
	num, err := s.number()
	if err != nil {
		return err
	}
	n, ok := parseInt(num)
	s.odd = s.odd || bytes.HasPrefix(num, []byte("-0"))
	if !ok {
		return fmt.Errorf("cannot unmarshal number %s into %s", num, field)
	}
	*dst = n
	return nil
}

// parseInt parses a JSON number as a decimal int64; false when it has a
// fraction or an exponent or is out of range (strconv.ParseInt's rules).
func parseInt(num []byte) (int64, bool) {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	var u uint64
	for _, c := range num {
		if c < '0' || c > '9' || u > (1<<63)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case neg && u <= 1<<63:
		return -int64(u), true
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}

// smallIntField is intField for an int.
func (s *scanner) smallIntField(dst *int, field string) error {
	n := int64(*dst)
	if err := s.intField(&n, field); err != nil {
		return err
	}
	if int64(int(n)) != n {
		return fmt.Errorf("cannot unmarshal number %d into %s", n, field)
	}
	*dst = int(n)
	return nil
}

// rawField reads any value into *dst, a copy of its bytes as they are
// (null too).
func (s *scanner) rawField(dst *json.RawMessage) error {
	s.ws()
	start := s.i
	if err := s.skipValue(); err != nil {
		return err
	}
	*dst = append((*dst)[:0], s.b[start:s.i]...)
	return nil
}

// timeField reads a time as time.Time's UnmarshalJSON does (null leaves
// it).
func (s *scanner) timeField(dst *time.Time) error {
	s.ws()
	start := s.i
	if err := s.skipValue(); err != nil {
		return err
	}
	raw := s.b[start:s.i]
	if err := dst.UnmarshalJSON(raw); err != nil {
		return err
	}
	// The encoding writes the time in one form: a time written
	// otherwise, or null, says other bytes.
	var buf [64]byte
	s.odd = s.odd || len(raw) < 2 || !bytes.Equal(raw[1:len(raw)-1], dst.AppendFormat(buf[:0], time.RFC3339Nano))
	return nil
}

// timePtrField reads a time into **dst: null sets it nil.
func (s *scanner) timePtrField(dst **time.Time) error {
	if null, err := s.isNull(); null || err != nil {
		s.odd = true
		if err == nil {
			*dst = nil
		}
		return err
	}
	if *dst == nil {
		*dst = new(time.Time)
	}
	return s.timeField(*dst)
}

// stringsField reads an array of strings into *dst as encoding/json
// does: null sets it nil, [] to an empty slice, elements decoded into
// the slice's backing array where it has room (a null element leaves
// what is there).
func (s *scanner) stringsField(dst *[]string, field string) error {
	if null, err := s.isNull(); null || err != nil {
		s.odd = true
		if err == nil {
			*dst = nil
		}
		return err
	}
	if c := s.peek(); c != '[' {
		return typeError(c, field)
	}
	v := *dst
	i := 0
	err := s.elements(func() error {
		switch {
		case i >= cap(v):
			v = append(v[:i], "")
		case i >= len(v):
			v = v[:i+1]
		}
		i++
		return s.stringField(&v[i-1], field)
	})
	if err != nil {
		return err
	}
	if i == 0 {
		v, s.odd = []string{}, true
	}
	*dst = v[:i]
	return nil
}

// member returns the name of names that key matches, as encoding/json
// matches them: exactly, else ignoring case; "" when none does. seen
// has a bit per name met before in the object: a name met again, one
// matched ignoring case and an unknown one are odd.
func (s *scanner) member(key []byte, names []string, seen *uint32) string {
	// The encoding writes the members in the order of names, some left
	// out: the next one is most likely after the last one met, which
	// saves comparing key with every name before it (an event has 21).
	i := -1
	for j := bits.Len32(*seen); j < len(names); j++ {
		if names[j] == string(key) {
			i = j
			break
		}
	}
	if i < 0 {
		i = slices.Index(names, string(key))
	}
	if i < 0 {
		i = slices.IndexFunc(names, func(n string) bool { return bytes.EqualFold(key, []byte(n)) })
		s.odd = true
	}
	if i < 0 {
		return ""
	}
	s.odd = s.odd || *seen&(1<<i) != 0
	*seen |= 1 << i
	return names[i]
}

// optString, optInt and optSmallInt read a field the encoding omits when
// empty: an empty one is odd.
func (s *scanner) optString(dst *string, field string) error {
	err := s.stringField(dst, field)
	s.odd = s.odd || *dst == ""
	return err
}

func (s *scanner) optInt(dst *int64, field string) error {
	err := s.intField(dst, field)
	s.odd = s.odd || *dst == 0
	return err
}

func (s *scanner) optSmallInt(dst *int, field string) error {
	err := s.smallIntField(dst, field)
	s.odd = s.odd || *dst == 0
	return err
}

// eventMembers, semanticsMembers and elementMembers are the JSON names of
// Event's, Semantics' and Element's fields.
var (
	eventMembers = []string{"schemaVersion", "key", "scope", "version", "prevVersion", "kind", "op", "before", "after",
		"createdAt", "expiresAt", "semantics", "specRef", "requestId", "requestDigest", "principal", "ts", "writerEpoch",
		"txnId", "txnSize", "element", "session"}
	semanticsMembers = []string{"purpose", "producer", "consumerHints", "ttlSeconds"}
	elementMembers   = []string{"op", "member", "value", "state", "deliveries", "visibleAt", "dedupId", "pushedAt", "expiresAt", "receiptNonce"}
	sessionMembers   = []string{"key", "reason"}
)

// eventAlways, semanticsAlways and elementAlways have a bit per member
// (by index above) the encoding always writes, omitempty or not: one
// missing is odd.
const (
	eventAlways     = (1<<22 - 1) &^ (1<<10 | 1<<12 | 1<<13 | 1<<14 | 1<<18 | 1<<19 | 1<<20 | 1<<21)
	semanticsAlways = 1 << 0
	elementAlways   = 1<<0 | 1<<1
	sessionAlways   = 1 << 0
)

// decodeEvent decodes the JSON event at the start of b into e as
// json.Decoder.Decode does; verbatim when b says as JSON what e's
// encoding says (UnmarshalRecord).
func decodeEvent(b []byte, e *contract.Event) (verbatim bool, err error) {
	s := scanner{b: b}
	c := s.peek()
	switch {
	case s.i == len(b):
		return false, io.EOF
	case c == '{':
		var seen uint32
		if err := s.members(func(name []byte) error { return s.eventMember(e, s.member(name, eventMembers, &seen)) }); err != nil {
			return false, err
		}
		// The Decoder does not read on: what follows is not the event's.
		s.ws()
		return !s.odd && seen&eventAlways == eventAlways && s.i == len(b), nil
	}
	// encoding/json checks the whole value, then finds its type wrong;
	// null leaves the event as it is.
	if err := s.skipValue(); err != nil || c == 'n' {
		return false, err
	}
	return false, typeError(c, "Event")
}

// eventMember decodes the value of Event's member name at s.i.
func (s *scanner) eventMember(e *contract.Event, name string) error {
	switch name {
	case "schemaVersion":
		return s.smallIntField(&e.SchemaVersion, "Event.schemaVersion")
	case "key":
		return s.stringField(&e.Key, "Event.key")
	case "scope":
		// A key's scope is its prefix, and the key comes first: it
		// shares the key's bytes instead of holding a copy.
		return s.sharedField(&e.Scope, e.Key, "Event.scope")
	case "version":
		return s.intField(&e.Version, "Event.version")
	case "prevVersion":
		return s.intField(&e.PrevVersion, "Event.prevVersion")
	case "kind":
		return s.knownField((*string)(&e.Kind), "Event.kind")
	case "op":
		return s.knownField((*string)(&e.Op), "Event.op")
	case "before":
		return s.rawField(&e.Before)
	case "after":
		return s.rawField(&e.After)
	case "createdAt":
		return s.timeField(&e.CreatedAt)
	case "expiresAt":
		return s.timePtrField(&e.ExpiresAt)
	case "semantics":
		return s.semantics(&e.Semantics)
	case "specRef":
		return s.optString(&e.SpecRef, "Event.specRef")
	case "requestId":
		return s.optString(&e.RequestID, "Event.requestId")
	case "requestDigest":
		return s.optString(&e.RequestDigest, "Event.requestDigest")
	case "principal":
		return s.stringField(&e.Principal, "Event.principal")
	case "ts":
		return s.timeField(&e.TS)
	case "writerEpoch":
		return s.intField(&e.WriterEpoch, "Event.writerEpoch")
	case "txnId":
		return s.optString(&e.TxnID, "Event.txnId")
	case "txnSize":
		return s.optSmallInt(&e.TxnSize, "Event.txnSize")
	case "element":
		return s.element(&e.Element)
	case "session":
		return s.session(&e.Session)
	}
	return s.skipValue()
}

// session decodes an object into **l, into the link already there if
// there is one; null sets it nil.
func (s *scanner) session(l **contract.SessionLink) error {
	switch c := s.peek(); c {
	case 'n':
		*l = nil
		return s.null()
	case '{':
		if *l == nil {
			*l = new(contract.SessionLink)
		}
		var seen uint32
		err := s.members(func(name []byte) error {
			switch s.member(name, sessionMembers, &seen) {
			case "key":
				return s.stringField(&(*l).Key, "SessionLink.key")
			case "reason":
				return s.optString(&(*l).Reason, "SessionLink.reason")
			}
			return s.skipValue()
		})
		s.odd = s.odd || seen&sessionAlways != sessionAlways
		return err
	default:
		return typeError(c, "SessionLink")
	}
}

// semantics decodes an object into *sem; null leaves it.
func (s *scanner) semantics(sem *contract.Semantics) error {
	switch c := s.peek(); c {
	case 'n':
		return s.null()
	case '{':
		var seen uint32
		defer func() { s.odd = s.odd || seen&semanticsAlways != semanticsAlways }()
		return s.members(func(name []byte) error {
			switch s.member(name, semanticsMembers, &seen) {
			case "purpose":
				return s.knownField(&sem.Purpose, "Semantics.purpose")
			case "producer":
				return s.optString(&sem.Producer, "Semantics.producer")
			case "consumerHints":
				return s.stringsField(&sem.ConsumerHints, "Semantics.consumerHints")
			case "ttlSeconds":
				return s.optInt(&sem.TTLSeconds, "Semantics.ttlSeconds")
			}
			return s.skipValue()
		})
	default:
		return typeError(c, "Semantics")
	}
}

// element decodes an object into **el, into the element already there
// if there is one; null sets it nil.
func (s *scanner) element(el **contract.Element) error {
	switch c := s.peek(); c {
	case 'n':
		*el = nil
		return s.null()
	case '{':
		if *el == nil {
			*el = new(contract.Element)
		}
		var seen uint32
		err := s.members(func(name []byte) error { return s.elementMember(*el, s.member(name, elementMembers, &seen)) })
		s.odd = s.odd || seen&elementAlways != elementAlways
		return err
	default:
		return typeError(c, "Element")
	}
}

// elementMember decodes the value of Element's member name at s.i.
func (s *scanner) elementMember(el *contract.Element, name string) error {
	switch name {
	case "op":
		return s.stringField(&el.Op, "Element.op")
	case "member":
		return s.stringField(&el.Member, "Element.member")
	case "value":
		return s.rawField(&el.Value)
	case "state":
		return s.optString(&el.State, "Element.state")
	case "deliveries":
		return s.optInt(&el.Deliveries, "Element.deliveries")
	case "visibleAt":
		return s.timePtrField(&el.VisibleAt)
	case "dedupId":
		return s.optString(&el.DedupID, "Element.dedupId")
	case "pushedAt":
		return s.timePtrField(&el.PushedAt)
	case "expiresAt":
		return s.timePtrField(&el.ExpiresAt)
	case "receiptNonce":
		return s.optString(&el.ReceiptNonce, "Element.receiptNonce")
	}
	return s.skipValue()
}
