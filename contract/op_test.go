package contract

import (
	"slices"
	"strings"
	"testing"
)

func TestOpOfVerb(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verb    string
		read    bool
		want    Op
		found   bool
		action  LockAction
		purpose string
	}{
		{"OKIncrement", "increment", false, OpIncrement, true, "", ""},
		{"OKTouch", "touch", false, OpTouch, true, "", ""},
		{"NotFoundTouchAsRead", "touch", true, "", false, "", ""},
		{"OKAcquire", "acquire", false, OpLockAcquire, true, LockAcquire, PurposeLock},
		{"OKElect", "elect", false, OpLeaderElect, true, LockAcquire, PurposeLeader},
		{"OKHeartbeat", "heartbeat", false, OpLeaderHeartbeat, true, LockExtend, PurposeLeader},
		{"OKResign", "resign", false, OpLeaderResign, true, LockRelease, PurposeLeader},
		{"OKLockCheck", "lock", true, OpLockCheck, true, "", PurposeLock},
		{"OKSAdd", "sadd", false, OpSAdd, true, "", PurposeSet},
		{"OKSIsMember", "sismember", true, OpSIsMember, true, "", PurposeSet},
		{"OKSMembers", "smembers", true, OpSMembers, true, "", PurposeSet},
		{"NotFoundSetReadAsWrite", "scard", false, "", false, "", ""},
		{"NotFoundReadVerbAsWrite", "lock", false, "", false, "", ""},
		{"NotFoundWriteVerbAsRead", "acquire", true, "", false, "", ""},
		{"NotFoundUnknown", "explode", false, "", false, "", ""},
		{"NotFoundEmpty", "", true, "", false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, ok := OpOfVerb(tc.verb, tc.read)
			if op != tc.want || ok != tc.found {
				t.Fatalf("OpOfVerb(%q, %v) = %q %v, want %q %v", tc.verb, tc.read, op, ok, tc.want, tc.found)
			}
			if ok && (op.Verb() != tc.verb || op.Reads() != tc.read || op.LockAction() != tc.action || op.Purpose() != tc.purpose) {
				t.Fatalf("%s: verb %q reads %v action %q purpose %q", op, op.Verb(), op.Reads(), op.LockAction(), op.Purpose())
			}
		})
	}
}

// TestVerbList checks the form of the verb lists (":a, :b or :c", in the
// op table's order) built from Verbs, not the verbs themselves: a new
// verb changes no line here.
func TestVerbList(t *testing.T) {
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
	writes := Verbs(false)
	colon := make([]string, len(writes))
	for i, v := range writes {
		colon[i] = ":" + v
	}
	if got, want := VerbList(false, true), strings.Join(colon[:len(colon)-1], ", ")+" or "+colon[len(colon)-1]; got != want {
		t.Errorf("writes: %s, want %s", got, want)
	}
	if got, want := VerbList(false, false), orList(writes); got != want {
		t.Errorf("writes without colons: %s, want %s", got, want)
	}
	for _, v := range []string{"increment", "acquire", "sadd", "qack"} {
		if !slices.Contains(writes, v) {
			t.Errorf("writes %v lack %s", writes, v)
		}
	}
	if slices.Contains(writes, "lock") || slices.Contains(Verbs(true), "acquire") {
		t.Errorf("reads and writes mixed: writes %v, reads %v", writes, Verbs(true))
	}
	if got := strings.Join(Verbs(true), " "); !strings.HasPrefix(got, "lock leader") {
		t.Errorf("reads: %s", got)
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
