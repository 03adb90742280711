package contract

import (
	"strings"
	"testing"
)

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

// releasedVerbs are the verbs of the first release, all lower-case. A
// key's last ':' segment is never a verb (SplitVerb), so a lower-case
// verb added later would make every existing key that ends in it
// invalid (job:status, once :status was a verb): later verbs hold an
// upper-case letter, which no key does.
var releasedVerbs = strings.Fields(`acquire extend release elect heartbeat resign lock leader counter increment touch
	sadd srem sismember smembers scard lpush rpush lpop rpop ltrim lrange llen history
	qpush qpop qack session keepalive revoke qpeek qsize`)

// TestNewVerbsCollideWithNoKey: every verb is one of the first release or
// holds an upper-case letter, so that no key valid before is refused, or
// read as a verb, after it.
func TestNewVerbsCollideWithNoKey(t *testing.T) {
	for _, o := range Ops() {
		v := o.Verb()
		if v == "" || strings.ToLower(v) != v {
			continue
		}
		if !strings.Contains(" "+strings.Join(releasedVerbs, " ")+" ", " "+v+" ") {
			t.Errorf("verb %q of %s is lower-case: keys ending in ':%s' written before it would become invalid; give it an upper-case letter", v, o, v)
		}
	}
	if _, err := ParseKey("tenant/acme/project/web/job:status"); err != nil {
		t.Errorf("job:status refused: %v", err)
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

// TestSplitVerb: the last ':' segment is a verb only when it is a known
// verb name; keys with ':' in their path stay whole.
func TestSplitVerb(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ raw, key, verb string }{
		{"tenant/a/project/p/user:alice", "tenant/a/project/p/user:alice", ""},
		{"tenant/a/project/p/user:alice:increment", "tenant/a/project/p/user:alice", "increment"},
		{"tenant/a/project/p/k:acquire", "tenant/a/project/p/k", "acquire"},
		{"tenant/a/project/p/k", "tenant/a/project/p/k", ""},
		{"tenant/a/project/p/k:bogus", "tenant/a/project/p/k:bogus", ""},
	} {
		if k, v := SplitVerb(tt.raw); k != tt.key || v != tt.verb {
			t.Errorf("SplitVerb(%q) = %q, %q; want %q, %q", tt.raw, k, v, tt.key, tt.verb)
		}
	}
}
