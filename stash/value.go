package stash

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/eskv/eskv/contract"
)

// validType reports whether t is one of the five stash types (R2.1).
func validType(t string) bool {
	switch t {
	case TypeResource, TypeArtifact, TypeContext, TypeCounter, TypeLock:
		return true
	}
	return false
}

// member is a member a type's schema names (R2.1), required in every
// value of the type, with its JSON type. Other members are free ("...").
type member struct {
	name string
	// check says whether x, decoded with numbers as json.Number, is of
	// the member's type, and answers what it should be when not.
	check func(x any) (ok bool, want string)
}

// isString, isNonEmptyString and isInt64 check a member's type.
func isString(x any) (bool, string) { _, ok := x.(string); return ok, "a string" }
func isNonEmptyString(x any) (bool, string) {
	s, ok := x.(string)
	return ok && s != "", "a non-empty string"
}
func isInt64(x any) (bool, string) { _, ok := asInt64(x); return ok, "an int64" }

// schemas are the members each type's value must hold (R2.1). A context
// holds anything.
var schemas = map[string][]member{
	TypeResource: {{"uri", isString}, {"kind", isString}},
	TypeArtifact: {{"path", isString}, {"producer", isString}, {"checksum", isString}},
	TypeCounter:  {{"value", isInt64}},
	TypeLock:     {{"holder", isNonEmptyString}, {"acquired_at", isString}},
}

// encodeValue is v as the JSON the stash stores, checked against the
// type's schema (checkSchema): an object with "uri" and "kind" for a
// resource, "path", "producer" and "checksum" for an artifact, any
// object or null (no value set, R4.3) for a context; {"value": int64}
// for a counter (null at create becomes {"value": 0}, R3.3); null or
// {"holder", "acquired_at"} for a lock.
func encodeValue(stashType string, v any, creating bool) (json.RawMessage, error) {
	if v == nil && stashType == TypeCounter && creating {
		v = map[string]any{"value": int64(0)}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("value of a %s stash does not encode as JSON: %v: %w", stashType, err, ErrInvalidValue)
	}
	norm, err := decodeValue(raw)
	if err != nil {
		return nil, err
	}
	if err := checkSchema(stashType, norm); err != nil {
		return nil, err
	}
	return raw, nil
}

// checkSchema checks a decoded value against the schema of stashType:
// an object holding the members of schemas, each of its type; null only
// for a context (no value set, R4.3) and a lock (unlocked). A value
// outside it is ErrInvalidValue and a contract.Error invalid naming the
// member at fault (value.<member>, or value).
func checkSchema(stashType string, v any) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("stash: value of a %s stash: %w: %w", stashType, contract.FieldErrorf(contract.EInvalid, field, format, args...), ErrInvalidValue)
	}
	members := schemas[stashType]
	m, isObject := v.(map[string]any)
	switch {
	case v == nil && (stashType == TypeContext || stashType == TypeLock):
		return nil
	case !isObject && len(members) == 0:
		return bad("value", "the value must be a JSON object or null")
	case !isObject:
		return bad("value", "the value must be a JSON object holding %s", names(members))
	}
	for _, mb := range members {
		x, ok := m[mb.name]
		if !ok {
			return bad("value."+mb.name, "member %q is missing: the value must hold %s", mb.name, names(members))
		}
		if ok, want := mb.check(x); !ok {
			return bad("value."+mb.name, "member %q must be %s", mb.name, want)
		}
	}
	return nil
}

// names lists the members' names for a message: "uri" and "kind".
func names(members []member) string {
	var b strings.Builder
	for i, mb := range members {
		switch {
		case i == 0:
		case i == len(members)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(mb.name))
	}
	return b.String()
}

// decodeValue decodes a stored value, numbers as json.Number so int64
// counters stay exact.
func decodeValue(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("value is not JSON: %v: %w", err, ErrInvalidValue)
	}
	return v, nil
}

// asObject is v as a map when it is one, else as JSON would read it
// back (a struct or a map[string]int64 the caller stored), so the entity
// methods see the same value Table.Set would store.
func asObject(v any) any {
	if _, ok := v.(map[string]any); ok || v == nil {
		return v
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	if n, err := decodeValue(raw); err == nil {
		return n
	}
	return v
}

// counterValue is the count a counter's value holds: its member "value"
// as an integer of any Go type or a json.Number; nil counts 0.
func counterValue(v any) (int64, error) {
	if v == nil {
		return 0, nil
	}
	m, ok := asObject(v).(map[string]any)
	if !ok {
		return 0, fmt.Errorf(`counter value %T is not {"value": <int64>}: %w`, v, ErrInvalidValue)
	}
	n, ok := asInt64(m["value"])
	if !ok {
		return 0, fmt.Errorf(`counter value %v is not an int64: %w`, m["value"], ErrInvalidValue)
	}
	return n, nil
}

// asInt64 converts the integer representations a counter may hold.
func asInt64(x any) (int64, bool) {
	switch n := x.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		return i, err == nil
	case float64:
		if n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64 {
			return int64(n), true
		}
	}
	return 0, false
}

// lockHolder is who holds a lock ("" when its value is nil: unlocked).
func lockHolder(v any) (string, error) {
	if v == nil {
		return "", nil
	}
	bad := fmt.Errorf(`lock value %v is neither null nor {"holder": <string>, "acquired_at": <timestamp>}: %w`, v, ErrInvalidValue)
	m, ok := asObject(v).(map[string]any)
	if !ok {
		return "", bad
	}
	h, ok := m["holder"].(string)
	if !ok || h == "" {
		return "", bad
	}
	if _, ok := m["acquired_at"].(string); !ok {
		return "", bad
	}
	return h, nil
}
