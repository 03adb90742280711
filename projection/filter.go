package projection

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/eskv/eskv/events"
)

// What the projection indexes for filters, per live entry whose value is a
// JSON object: its top-level fields holding a string, a number, a boolean
// or null, within these caps. An entry whose field is not indexed (nested,
// too long, or past the field cap) matches no filter on that field. The
// numbers are those of kv_value_fields in schemas/postgres/00004_kv_fields.sql.
const (
	// MaxFilterFields is how many fields of one value are indexed: the
	// first ones by name in byte order.
	MaxFilterFields = 64
	// MaxFieldNameBytes is the longest field name indexed.
	MaxFieldNameBytes = 256
	// MaxFieldStringBytes is the longest string indexed, in UTF-8 bytes.
	MaxFieldStringBytes = 256
	// MaxFieldNumberChars bounds the numbers indexed: written out in full,
	// without exponent (1e300 is 301 characters), they have at most this
	// many characters.
	MaxFieldNumberChars = 256
)

// maxFilterExponent bounds the exponent of a filter's number, so every
// number accepted is one Postgres numeric can hold.
const maxFilterExponent = 1000

// Op is how a filter compares a field with its value.
type Op string

// The comparisons. Numbers compare numerically, strings by their UTF-8
// bytes; booleans and null only take OpEq.
const (
	OpEq  Op = "eq"
	OpNe  Op = "ne"
	OpLt  Op = "lt"
	OpLte Op = "lte"
	OpGt  Op = "gt"
	OpGte Op = "gte"
)

// Ops lists every Op, in the order error messages name them.
var Ops = []Op{OpEq, OpNe, OpLt, OpLte, OpGt, OpGte}

var opSQL = map[Op]string{OpEq: "=", OpNe: "<>", OpLt: "<", OpLte: "<=", OpGt: ">", OpGte: ">="}

// Filter selects the entries whose value is a JSON object with a
// top-level field Field holding a value of the same JSON type as Value
// that compares to it as Op says: {"state":"done"} matches state eq
// "done", and neither state eq 5 nor missing eq "done". Strings compare
// bytewise, so timestamps compare as instants when written in one fixed
// form, such as RFC 3339 in UTC with always the same number of
// fractional digits.
type Filter struct {
	Field string
	Op    Op
	// Value is one JSON literal: a number, a string, true, false or null.
	Value json.RawMessage
}

// Validate checks f, returning an *events.Error with code invalid naming
// "field", "op" or "value".
func (f *Filter) Validate() error {
	_, err := f.operand()
	return err
}

// operand is a filter's value as the SQL compares it.
type operand struct {
	typ  string // kv_fields.type: n, s, b or z
	text string // the number as written, the string, "true"/"false", or "" for null
}

func (f *Filter) operand() (operand, error) {
	switch {
	case f.Field == "":
		return operand{}, events.FieldErrorf(events.EInvalid, "field", "field is empty: name a top-level field of the values")
	case !utf8.ValidString(f.Field) || strings.ContainsRune(f.Field, 0):
		return operand{}, events.FieldErrorf(events.EInvalid, "field", "field must be valid UTF-8 without NUL characters")
	case len(f.Field) > MaxFieldNameBytes:
		return operand{}, events.FieldErrorf(events.EInvalid, "field",
			"field is %d bytes long; fields with names over %d bytes are not indexed", len(f.Field), MaxFieldNameBytes)
	}
	if _, ok := opSQL[f.Op]; !ok {
		return operand{}, events.FieldErrorf(events.EInvalid, "op", "op %q is not one of %s", f.Op, opList())
	}
	v, err := decodeLiteral(f.Value)
	if err != nil {
		return operand{}, err
	}
	switch v := v.(type) {
	case json.Number:
		if err := checkNumber(string(v)); err != nil {
			return operand{}, err
		}
		return operand{typ: "n", text: string(v)}, nil
	case string:
		if strings.ContainsRune(v, 0) {
			return operand{}, events.FieldErrorf(events.EInvalid, "value", "value must not contain NUL characters")
		}
		if len(v) > MaxFieldStringBytes {
			return operand{}, events.FieldErrorf(events.EInvalid, "value",
				"value is a string of %d bytes; strings over %d bytes are not indexed", len(v), MaxFieldStringBytes)
		}
		return operand{typ: "s", text: v}, nil
	case bool:
		if f.Op != OpEq {
			return operand{}, events.FieldErrorf(events.EInvalid, "op", "op %s does not compare booleans: use eq", f.Op)
		}
		return operand{typ: "b", text: strconv.FormatBool(v)}, nil
	default: // nil: JSON null
		if f.Op != OpEq {
			return operand{}, events.FieldErrorf(events.EInvalid, "op", "op %s does not compare null: use eq", f.Op)
		}
		return operand{typ: "z", text: ""}, nil
	}
}

// decodeLiteral decodes one JSON scalar: json.Number, string, bool or nil.
func decodeLiteral(raw json.RawMessage) (any, error) {
	bad := events.FieldErrorf(events.EInvalid, "value", "value must be one JSON number, string, true, false or null")
	if !json.Valid(raw) {
		return nil, bad
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, bad
	}
	switch v.(type) {
	case json.Number, string, bool, nil:
		return v, nil
	default:
		return nil, events.FieldErrorf(events.EInvalid, "value", "value is a JSON object or array; filters compare numbers, strings, booleans and null")
	}
}

// checkNumber bounds a filter's number (valid JSON number syntax) so
// Postgres numeric holds it.
func checkNumber(s string) error {
	if len(s) > MaxFieldNumberChars {
		return events.FieldErrorf(events.EInvalid, "value", "value is a number of %d characters; the limit is %d", len(s), MaxFieldNumberChars)
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || exp > maxFilterExponent || exp < -maxFilterExponent {
			return events.FieldErrorf(events.EInvalid, "value", "value's exponent must be between -%d and %d", maxFilterExponent, maxFilterExponent)
		}
	}
	return nil
}

func opList() string {
	s := make([]string, len(Ops))
	for i, o := range Ops {
		s[i] = string(o)
	}
	return strings.Join(s, ", ")
}
