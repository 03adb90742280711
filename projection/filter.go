package projection

import (
	"encoding/json"
	"strconv"

	"github.com/eskv/eskv/contract"
)

// A filter (Filter) is answered from kv_fields, the index of the
// values' top-level scalar fields within the caps MaxFilterFields,
// contract.MaxFieldNameBytes, contract.MaxFieldStringBytes and
// MaxFieldNumberChars.

var opSQL = map[contract.FilterOp]string{
	contract.FilterEq: "=", contract.FilterNe: "<>", contract.FilterLt: "<",
	contract.FilterLte: "<=", contract.FilterGt: ">", contract.FilterGte: ">=",
}

// operand is a filter's value as the SQL compares it.
type operand struct {
	typ  string // kv_fields.type: n, s, b or z
	text string // the number as written, the string, "true"/"false", or "" for null
}

// operandOf validates f and returns its value as the SQL compares it.
func operandOf(f *Filter) (operand, error) {
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
