package projection

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/eskv/eskv/contract"
)

// What the projection indexes for filters, per live entry whose value is a
// JSON object: its top-level fields holding a string, a number, a boolean
// or null, within these caps (and contract.MaxFieldNameBytes and
// contract.MaxFieldStringBytes). An entry whose field
// is not indexed (nested, too long, or past the field cap) matches no
// filter on that field. The numbers are those of kv_value_fields in
// schemas/postgres/00004_kv_fields.sql.
const (
	// MaxFilterFields is how many fields of one value are indexed: the
	// first ones by name in byte order.
	MaxFilterFields = 64
	// MaxFieldNumberChars bounds the numbers indexed: written out in full,
	// without exponent (1e300 is 301 characters), they have at most this
	// many characters.
	MaxFieldNumberChars = 256
	// MaxFilterExponent bounds the exponent of a filter's number, so every
	// number accepted is one Postgres numeric can hold.
	MaxFilterExponent = 1000
)

// Filter selects the entries whose value is a JSON object with a
// top-level field Field holding a value of the same JSON type as Value
// that compares to it as Op says: {"state":"done"} matches state eq
// "done", and neither state eq 5 nor missing eq "done". Strings compare
// bytewise, so timestamps compare as instants when written in one fixed
// form, such as RFC 3339 in UTC with always the same number of
// fractional digits.
type Filter struct {
	Field string
	Op    contract.FilterOp
	// Value is one JSON literal: a number, a string, true, false or null.
	Value json.RawMessage
}

// Validate checks f, returning an *Error with code invalid naming
// "field", "op" or "value".
func (f *Filter) Validate() error {
	_, err := f.Literal()
	return err
}

// Literal validates f and returns its value decoded: a json.Number, a
// string, a bool, or nil for null.
func (f *Filter) Literal() (any, error) {
	switch {
	case f.Field == "":
		return nil, contract.FieldErrorf(contract.EInvalid, "field", "field is empty: name a top-level field of the values")
	case !utf8.ValidString(f.Field) || strings.ContainsRune(f.Field, 0):
		return nil, contract.FieldErrorf(contract.EInvalid, "field", "field must be valid UTF-8 without NUL characters")
	case len(f.Field) > contract.MaxFieldNameBytes:
		return nil, contract.FieldErrorf(contract.EInvalid, "field",
			"field is %d bytes long; fields with names over %d bytes are not indexed", len(f.Field), contract.MaxFieldNameBytes)
	}
	if !f.Op.Valid() {
		return nil, contract.FieldErrorf(contract.EInvalid, "op", "op %q is not one of %s", f.Op, filterOpList())
	}
	v, err := decodeLiteral(f.Value)
	if err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case json.Number:
		if err := checkFilterNumber(string(v)); err != nil {
			return nil, err
		}
		return v, nil
	case string:
		if strings.ContainsRune(v, 0) {
			return nil, contract.FieldErrorf(contract.EInvalid, "value", "value must not contain NUL characters")
		}
		if len(v) > contract.MaxFieldStringBytes {
			return nil, contract.FieldErrorf(contract.EInvalid, "value",
				"value is a string of %d bytes; strings over %d bytes are not indexed", len(v), contract.MaxFieldStringBytes)
		}
		return v, nil
	case bool:
		if f.Op != contract.FilterEq {
			return nil, contract.FieldErrorf(contract.EInvalid, "op", "op %s does not compare booleans: use eq", f.Op)
		}
		return v, nil
	default: // nil: JSON null
		if f.Op != contract.FilterEq {
			return nil, contract.FieldErrorf(contract.EInvalid, "op", "op %s does not compare null: use eq", f.Op)
		}
		return nil, nil
	}
}

// decodeLiteral decodes one JSON scalar: json.Number, string, bool or nil.
func decodeLiteral(raw json.RawMessage) (any, error) {
	bad := contract.FieldErrorf(contract.EInvalid, "value", "value must be one JSON number, string, true, false or null")
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
		return nil, contract.FieldErrorf(contract.EInvalid, "value", "value is a JSON object or array; filters compare numbers, strings, booleans and null")
	}
}

// checkFilterNumber bounds a filter's number (valid JSON number syntax)
// so Postgres numeric holds it.
func checkFilterNumber(s string) error {
	if len(s) > MaxFieldNumberChars {
		return contract.FieldErrorf(contract.EInvalid, "value", "value is a number of %d characters; the limit is %d", len(s), MaxFieldNumberChars)
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || exp > MaxFilterExponent || exp < -MaxFilterExponent {
			return contract.FieldErrorf(contract.EInvalid, "value", "value's exponent must be between -%d and %d", MaxFilterExponent, MaxFilterExponent)
		}
	}
	return nil
}

func filterOpList() string {
	s := make([]string, len(contract.FilterOps))
	for i, o := range contract.FilterOps {
		s[i] = string(o)
	}
	return strings.Join(s, ", ")
}
