package contract

import "testing"

// TestOps: every op is listed once, and the custom methods' verbs are
// unique per method (GET or POST).
func TestOps(t *testing.T) {
	ops, verbs := map[Op]bool{}, map[string]bool{}
	for _, o := range Ops() {
		if ops[o] {
			t.Fatalf("%s is listed twice", o)
		}
		ops[o] = true
		if v := o.Verb(); v != "" {
			k := v + map[bool]string{true: " GET", false: " POST"}[o.Reads()]
			if verbs[k] {
				t.Fatalf("verb %s names two ops", k)
			}
			verbs[k] = true
		}
	}
	if !ops[OpGet] || !ops[OpQSize] || !ops[OpHistory] {
		t.Fatalf("ops: %v", ops)
	}
}

// TestOrList checks the form of the verb lists messages name (":a, :b
// or :c"), not the verbs themselves: a new verb changes no line here.
func TestOrList(t *testing.T) {
	for _, tc := range []struct {
		items []string
		want  string
	}{
		{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a or b"}, {[]string{"a", "b", "c"}, "a, b or c"},
	} {
		if got := orList(tc.items); got != tc.want {
			t.Errorf("orList(%q) = %q, want %q", tc.items, got, tc.want)
		}
	}
}
