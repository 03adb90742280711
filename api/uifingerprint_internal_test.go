package api

import "testing"

// TestCanonicalJSON: two texts of one JSON value (member order, space,
// number forms, as a row's written text and its history's jsonb text
// differ) are one canonical text; different values stay different.
func TestCanonicalJSON(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{`{"secret":"x","v":"A"}`, `{"v": "A", "secret": "x"}`},
		{`[1.50, 100, -0.0, 0.001]`, `[15e-1,1E+2,0,1e-3]`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`"\u00e9<"`, `"é\u003c"`},
	} {
		if a, b := string(canonicalJSON([]byte(tc.a))), string(canonicalJSON([]byte(tc.b))); a != b {
			t.Errorf("%s is %s but %s is %s", tc.a, a, tc.b, b)
		}
	}
	for _, tc := range []struct{ a, b string }{
		{`1`, `10`}, {`1.5`, `15`}, {`"1"`, `1`}, {`{"a":1}`, `{"b":1}`}, {`[1,2]`, `[2,1]`}, {`-1`, `1`},
	} {
		if a, b := string(canonicalJSON([]byte(tc.a))), string(canonicalJSON([]byte(tc.b))); a == b {
			t.Errorf("%s and %s are both %s", tc.a, tc.b, a)
		}
	}
	if got := canonicalNumber("1e99999999999999999999"); got != "1e99999999999999999999" {
		t.Errorf("a huge exponent: %s, want it kept", got)
	}
}
