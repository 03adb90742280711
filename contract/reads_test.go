package contract

import (
	"fmt"
	"testing"
)

// TestBatchGetBodyValidate: 1 to MaxBatchGetKeys valid keys, none twice;
// an error names the field at fault.
func TestBatchGetBodyValidate(t *testing.T) {
	many := make([]string, MaxBatchGetKeys+1)
	for i := range many {
		many[i] = fmt.Sprintf("tenant/a/project/p/k%d", i)
	}
	for _, tc := range []struct {
		name  string
		keys  []string
		field string // "" when valid
	}{
		{"OKOne", []string{"tenant/a/project/p/k"}, ""},
		{"OKMax", many[:MaxBatchGetKeys], ""},
		{"OKAcrossProjects", []string{"tenant/a/project/p/k", "tenant/b/project/q/k"}, ""},
		{"ErrNone", nil, "keys"},
		{"ErrTooMany", many, "keys"},
		{"ErrBadKey", []string{"tenant/a/project/p/k", "tenant/a/k"}, "keys[1]"},
		{"ErrTwice", []string{"tenant/a/project/p/k", "tenant/a/project/p/j", "tenant/a/project/p/k"}, "keys[2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&BatchGetBody{Keys: tc.keys}).Validate()
			if tc.field == "" && err != nil {
				t.Fatalf("Validate = %v, want nil", err)
			}
			if e, ok := err.(*Error); tc.field != "" && (!ok || e.Code != EInvalid || e.Field != tc.field) {
				t.Fatalf("Validate = %v, want invalid naming %s", err, tc.field)
			}
		})
	}
}
