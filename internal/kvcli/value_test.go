package kvcli

import (
	"errors"
	"testing"
)

// TestValueRule pins the one rule every VALUE argument follows: JSON when
// valid, else a string; --json requires JSON; --string forces a string.
func TestValueRule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		rule valueRule
		want string // "" when a usage error
	}{
		{"sk-abc123", valueRule{}, `"sk-abc123"`},
		{"42", valueRule{}, `42`},
		{`{"a": 1}`, valueRule{}, `{"a":1}`},
		{`"quoted"`, valueRule{}, `"quoted"`},
		{"User login at <now> & more", valueRule{}, `"User login at <now> & more"`},
		{`{"task": "t", "params": {...}}`, valueRule{}, `"{\"task\": \"t\", \"params\": {...}}"`},
		{"42", valueRule{asString: true}, `"42"`},
		{"42", valueRule{asJSON: true}, `42`},
		{"hello", valueRule{asJSON: true}, ""},
		{"42", valueRule{asJSON: true, asString: true}, ""},
	}
	for _, c := range cases {
		got, err := c.rule.parse(c.in, "VALUE", "kvctl set")
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%q %+v: got %s, want a usage error", c.in, c.rule, got)
		case c.want == "" && !errors.As(err, new(*usageError)):
			t.Errorf("%q %+v: error %v is not a usage error (exit %d)", c.in, c.rule, err, exitUsage)
		case c.want != "" && (err != nil || string(got) != c.want):
			t.Errorf("%q %+v: got %s, %v; want %s", c.in, c.rule, got, err, c.want)
		}
	}
}
