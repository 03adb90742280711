package projection

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestArrayArgsEncodeAsPgx: the arrays of arrayArgs encode to the bytes
// pgx writes for the plain slices, in both formats, for every parameter
// type of Apply's statements: nil slices (NULL), empty ones, nil
// elements (NULL) and values.
func TestArrayArgsEncodeAsPgx(t *testing.T) {
	t.Parallel()
	s1, s2 := "a", `{"client":1,"seq":2} "quoted" \ é`
	t1 := time.Date(2026, 11, 24, 9, 0, 0, 123456789, time.UTC)
	t2 := time.Date(1999, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	m := pgtype.NewMap()
	for _, tc := range []struct {
		typ string
		arg any
	}{
		{"_text", []string{s1, "", s2}},
		{"_text", []string{}},
		{"_text", []string(nil)},
		{"_text", []*string{&s1, nil, &s2}},
		{"_text", []*string{nil}},
		{"_text", []*string(nil)},
		{"_int8", []int64{0, 1, 255, 256, -1, 1 << 62}},
		{"_int8", []int64(nil)},
		{"_timestamptz", []time.Time{t1, t2, {}}},
		{"_timestamptz", []time.Time(nil)},
		{"_timestamptz", []*time.Time{&t1, nil, &t2}},
		{"_timestamptz", []*time.Time(nil)},
	} {
		typ, ok := m.TypeForName(tc.typ)
		if !ok {
			t.Fatalf("no type %s", tc.typ)
		}
		args := []any{tc.arg}
		arrayArgs(args)
		if fmt.Sprintf("%T", args[0]) == fmt.Sprintf("%T", tc.arg) {
			t.Errorf("%T was not replaced", tc.arg)
		}
		for _, format := range []int16{pgtype.BinaryFormatCode, pgtype.TextFormatCode} {
			want, err := m.Encode(typ.OID, format, tc.arg, nil)
			if err != nil {
				t.Fatalf("%T: %v", tc.arg, err)
			}
			got, err := m.Encode(typ.OID, format, args[0], nil)
			if err != nil {
				t.Fatalf("%T as %T: %v", tc.arg, args[0], err)
			}
			if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
				t.Errorf("%T %v, format %d: encodes as %q, pgx as %q", tc.arg, tc.arg, format, got, want)
			}
		}
	}
}
