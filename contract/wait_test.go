package contract

import (
	"testing"
	"time"
)

func TestParseWait(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     time.Duration
		err      bool
	}{
		{"OKDuration", "1500ms", 1500 * time.Millisecond, false},
		{"OKSeconds", "30", 30 * time.Second, false},
		{"OKZero", "0", 0, false},
		{"OKFormatted", FormatWait(2500 * time.Millisecond), 2500 * time.Millisecond, false},
		{"ErrOverMax", "31s", 0, true},
		{"ErrOverMaxSeconds", "31", 0, true},
		{"ErrNegative", "-1s", 0, true},
		{"ErrGarbage", "soon", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseWait(tc.in)
			if tc.err {
				if ErrorCode(err) != EInvalid || err.(*Error).Field != WaitParam {
					t.Fatalf("ParseWait(%q) = %v, %v; want invalid naming wait", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseWait(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}
