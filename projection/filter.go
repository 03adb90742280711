package projection

import (
	"encoding/json"
	"strconv"

	"github.com/eskv/eskv/events"
)

// A filter (events.Filter) is answered from kv_fields, the index of the
// values' top-level scalar fields within the caps events.MaxFilterFields,
// events.MaxFieldNameBytes, events.MaxFieldStringBytes and
// events.MaxFieldNumberChars.

var opSQL = map[events.FilterOp]string{
	events.FilterEq: "=", events.FilterNe: "<>", events.FilterLt: "<",
	events.FilterLte: "<=", events.FilterGt: ">", events.FilterGte: ">=",
}

// operand is a filter's value as the SQL compares it.
type operand struct {
	typ  string // kv_fields.type: n, s, b or z
	text string // the number as written, the string, "true"/"false", or "" for null
}

// operandOf validates f and returns its value as the SQL compares it.
func operandOf(f *events.Filter) (operand, error) {
	v, err := f.Literal()
	if err != nil {
		return operand{}, err
	}
	switch v := v.(type) {
	case json.Number:
		return operand{typ: "n", text: string(v)}, nil
	case string:
		return operand{typ: "s", text: v}, nil
	case bool:
		return operand{typ: "b", text: strconv.FormatBool(v)}, nil
	default: // nil: JSON null
		return operand{typ: "z", text: ""}, nil
	}
}
