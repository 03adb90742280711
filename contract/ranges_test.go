package contract

import (
	"errors"
	"testing"
)

// TestRangeBodiesValidate: a prefix write's prefix lies inside one
// project, and its cursor, only with chunked, is a key under it.
func TestRangeBodiesValidate(t *testing.T) {
	t.Parallel()
	p := "tenant/a/project/b/docs/"
	for _, tc := range []struct {
		name  string
		b     DeleteRangeBody
		field string // "" when valid
	}{
		{"OK", DeleteRangeBody{Prefix: p}, ""},
		{"OKProject", DeleteRangeBody{Prefix: "tenant/a/project/b/"}, ""},
		{"OKStringPrefix", DeleteRangeBody{Prefix: "tenant/a/project/b/do"}, ""},
		{"OKCursor", DeleteRangeBody{Prefix: p, Chunked: true, Cursor: p + "k"}, ""},
		{"ErrSpansProjects", DeleteRangeBody{Prefix: "tenant/a/project/"}, "prefix"},
		{"ErrTenant", DeleteRangeBody{Prefix: "tenant/a/"}, "prefix"},
		{"ErrEmpty", DeleteRangeBody{}, "prefix"},
		{"ErrCursorNotChunked", DeleteRangeBody{Prefix: p, Cursor: p + "k"}, "cursor"},
		{"ErrCursorOutside", DeleteRangeBody{Prefix: p, Chunked: true, Cursor: "tenant/a/project/b/other"}, "cursor"},
		{"ErrCursorIsPrefix", DeleteRangeBody{Prefix: p, Chunked: true, Cursor: p}, "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.b.Validate()
			var e *Error
			if (tc.field == "") != (err == nil) || (err != nil && (!errors.As(err, &e) || e.Code != EInvalid || e.Field != tc.field)) {
				t.Fatalf("Validate(%+v) = %v, want field %q", tc.b, err, tc.field)
			}
			due := ExpireDueBody{Prefix: tc.b.Prefix, Cursor: tc.b.Cursor}
			if tc.field != "cursor" || tc.b.Chunked {
				if (due.Validate() == nil) != (err == nil) {
					t.Fatalf("ExpireDueBody(%+v).Validate() = %v", due, due.Validate())
				}
			}
		})
	}
}
