package codec

import (
	"strconv"

	"github.com/eskv/eskv/contract"
)

// The PUT body's fast decoder. Every PUT of figure 18 and figure 2 goes
// through decodeBody, whose strict decode (encoding/json's reflection,
// then checkMembers' second pass for the member names) was 3.6 % of the
// writer's CPU under figure 18a and 7 % under PUT-only load
// (docs/performance.md, p6-http). DecodePutBody reads the common body in
// one pass without reflection; anything it is not sure of it leaves to
// the strict decode, so that every error (code, message and field) stays
// the strict decode's, byte for byte (FuzzDecodePutBody compares them).

// Member bits of a PUT body, to find a member given twice.
const (
	putValue = 1 << iota
	putExpectedVersion
	putTTLSeconds
	putKeepTTL
	putSemantics
	putRequestID
	putSpecRef
)

// DecodePutBody decodes b, a whole request body, into v when b is a JSON
// object the API's strict decode (encoding/json, then its member check) accepts
// without an error and decodes to the same v, and reports whether it
// did. It gives up (false, v untouched) on anything else, valid or not:
// a member name with an escape or in another case, a member given twice,
// a number that is not a plain int64, a string that is not plain, data
// after the object. v.Value is b's bytes of the value, not a copy: b is
// the request's own buffer.
func DecodePutBody(b []byte, v *contract.PutBody) bool {
	var out contract.PutBody
	d := fastDecoder{scanner{b: b}}
	if !d.object(func(name []byte) bool {
		switch string(name) {
		case "value":
			start := d.i
			if !d.skip() {
				return false
			}
			out.Value = b[start:d.i:d.i]
		case "expectedVersion":
			return d.optInt(&out.ExpectedVersion)
		case "ttlSeconds":
			return d.optInt(&out.TTLSeconds)
		case "keepTtl":
			return d.bool(&out.KeepTTL)
		case "requestId":
			return d.string(&out.RequestID)
		case "specRef":
			return d.string(&out.SpecRef)
		case "semantics":
			return d.semantics(&out.Semantics)
		default:
			return false
		}
		return true
	}, putBits) {
		return false
	}
	if d.ws(); d.i != len(b) {
		return false
	}
	*v = out
	return true
}

// putBits is the member bit of each name of a PUT body.
func putBits(name []byte) int {
	switch string(name) {
	case "value":
		return putValue
	case "expectedVersion":
		return putExpectedVersion
	case "ttlSeconds":
		return putTTLSeconds
	case "keepTtl":
		return putKeepTTL
	case "semantics":
		return putSemantics
	case "requestId":
		return putRequestID
	case "specRef":
		return putSpecRef
	}
	return 0
}

// semanticsBits is the member bit of each name of contract.Semantics.
func semanticsBits(name []byte) int {
	switch string(name) {
	case "purpose":
		return 1
	case "producer":
		return 2
	case "consumerHints":
		return 4
	case "ttlSeconds":
		return 8
	}
	return 0
}

// fastDecoder reads a JSON text with the package's scanner; each method
// returns false where the strict decode might answer otherwise than it
// would.
type fastDecoder struct{ scanner }

// next skips space and reports whether b[i] is c (and steps past it).
func (d *fastDecoder) next(c byte) bool {
	if d.peek() == c {
		d.i++
		return true
	}
	return false
}

// object reads an object whose member names are plain strings, each a
// name bits knows (non-zero) at most once; member reads each value, from
// after the colon.
func (d *fastDecoder) object(member func(name []byte) bool, bits func(name []byte) int) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	seen := 0
	for {
		d.ws()
		name, ok := d.plain()
		if !ok {
			return false
		}
		bit := bits(name)
		if bit == 0 || seen&bit != 0 || !d.next(':') {
			return false
		}
		seen |= bit
		d.ws()
		if !member(name) {
			return false
		}
		if d.next(',') {
			continue
		}
		return d.next('}')
	}
}

// plain reads a string without escapes or control characters, in valid
// UTF-8 (encoding/json would decode it to its bytes), and returns its
// bytes.
func (d *fastDecoder) plain() ([]byte, bool) {
	raw, ok, err := d.plainString()
	return raw, ok && err == nil
}

// nullNext reads a null if one is next.
func (d *fastDecoder) nullNext() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// optInt reads null (p stays nil) or an integer in int64's range without
// fraction or exponent.
func (d *fastDecoder) optInt(p **int64) bool {
	if d.nullNext() {
		return true
	}
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	if !d.intPart() {
		return false
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	if err != nil {
		return false
	}
	*p = &n
	return true
}

// intPart reads the integer part of a JSON number: 0, or a digit 1-9 and
// more digits; a fraction or an exponent after it is not read (and
// fails the member's delimiter check).
func (d *fastDecoder) intPart() bool {
	if d.i >= len(d.b) || d.b[d.i] < '0' || d.b[d.i] > '9' {
		return false
	}
	if d.b[d.i] == '0' {
		d.i++
		return true
	}
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	return true
}

// bool reads true, false or null (p unchanged).
func (d *fastDecoder) bool(p *bool) bool {
	rest := d.b[d.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		*p, d.i = true, d.i+4
	case len(rest) >= 5 && string(rest[:5]) == "false":
		*p, d.i = false, d.i+5
	default:
		return d.nullNext()
	}
	return true
}

// string reads a plain string or null (p unchanged).
func (d *fastDecoder) string(p *string) bool {
	if d.nullNext() {
		return true
	}
	s, ok := d.plain()
	if ok {
		*p = string(s)
	}
	return ok
}

// semantics reads null (p stays nil) or a Semantics object.
func (d *fastDecoder) semantics(p **contract.Semantics) bool {
	if d.nullNext() {
		return true
	}
	var s contract.Semantics
	if !d.object(func(name []byte) bool {
		switch string(name) {
		case "purpose":
			return d.string(&s.Purpose)
		case "producer":
			return d.string(&s.Producer)
		case "ttlSeconds":
			var n *int64
			if !d.optInt(&n) {
				return false
			}
			if n != nil {
				s.TTLSeconds = *n
			}
			return true
		case "consumerHints":
			return d.strings(&s.ConsumerHints)
		}
		return false
	}, semanticsBits) {
		return false
	}
	*p = &s
	return true
}

// strings reads null (p stays nil) or an array of plain strings ([] is
// an empty, non-nil slice, as encoding/json decodes it).
func (d *fastDecoder) strings(p *[]string) bool {
	if d.nullNext() {
		return true
	}
	if !d.next('[') {
		return false
	}
	out := []string{}
	if !d.next(']') {
		for {
			d.ws()
			s, ok := d.plain()
			if !ok {
				return false
			}
			out = append(out, string(s))
			if d.next(',') {
				continue
			}
			if !d.next(']') {
				return false
			}
			break
		}
	}
	*p = out
	return true
}

// skip steps over one JSON value that encoding/json's scanner
// accepts (ScanValue); false on anything else, and on values
// nested deeper than ScanValue reads.
func (d *fastDecoder) skip() bool {
	end, _, ok := ScanValue(d.b, d.i)
	d.i = end
	return ok
}
