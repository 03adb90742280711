package contract

import (
	"testing"
)

func TestParseCursor(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Cursor
		ok   bool
	}{
		{"p0.o0", Cursor{0, 0}, true},
		{"p3.o1234", Cursor{3, 1234}, true},
		{"p11.o-1", Cursor{11, -1}, true},
		{"p2147483647.o9223372036854775807", Cursor{2147483647, 9223372036854775807}, true},
		{"", Cursor{}, false},
		{"p1", Cursor{}, false},
		{"p1.o", Cursor{}, false},
		{"1.o2", Cursor{}, false},
		{"p01.o2", Cursor{}, false},
		{"p1.o02", Cursor{}, false},
		{"p+1.o2", Cursor{}, false},
		{"p-1.o2", Cursor{}, false},
		{"p1.o-2", Cursor{}, false},
		{"p1.o-0", Cursor{}, false},
		{"p1.o2 ", Cursor{}, false},
		{"P1.o2", Cursor{}, false},
		{"p1.o2.o3", Cursor{}, false},
		{"p2147483648.o1", Cursor{}, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseCursor(tc.in, "after")
			if !tc.ok {
				if e, isE := err.(*Error); !isE || e.Code != EInvalid || e.Field != "after" {
					t.Fatalf("ParseCursor(%q) = %v, %v; want invalid on after", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want || got.String() != tc.in {
				t.Fatalf("ParseCursor(%q) = %v (%s), %v", tc.in, got, got, err)
			}
		})
	}
}

// FuzzParseCursor: a cursor parses only from its one text.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"p0.o0", "p3.o1234", "p1.o-1", "p01.o2", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s, "after")
		if err == nil && c.String() != s {
			t.Fatalf("%q parsed as %v, whose text is %q", s, c, c)
		}
		if err == nil && (c.Partition < 0 || c.Offset < -1) {
			t.Fatalf("%q parsed as %v", s, c)
		}
	})
}
