package projection

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestFilterValidate: a filter names a field, one of the comparisons and
// one JSON literal the projection can index; anything else is invalid,
// naming what is wrong.
func TestFilterValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		check func() error
		field string
	}{
		{"OKFilter", (&Filter{Field: "n", Op: contract.FilterGte, Value: json.RawMessage(`1e3`)}).Validate, ""},
		{"ErrFilterOp", (&Filter{Field: "n", Op: "like", Value: json.RawMessage(`1`)}).Validate, "op"},
		{"ErrFilterBoolLt", (&Filter{Field: "n", Op: contract.FilterLt, Value: json.RawMessage(`true`)}).Validate, "op"},
		{"ErrFilterExponent", (&Filter{Field: "n", Op: contract.FilterEq, Value: json.RawMessage(`1e1001`)}).Validate, "value"},
		{"ErrFilterObject", (&Filter{Field: "n", Op: contract.FilterEq, Value: json.RawMessage(`{}`)}).Validate, "value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check()
			var e *contract.Error
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.field != "" && (!errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != tc.field):
				t.Fatalf("want invalid %s, got %v", tc.field, err)
			}
		})
	}
}
