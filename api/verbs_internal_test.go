package api

import (
	"slices"
	"strings"
	"testing"

	"github.com/eskv/eskv/contract"
)

func TestOpOfVerb(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verb    string
		read    bool
		want    contract.Op
		found   bool
		action  contract.LockAction
		purpose string
	}{
		{"OKIncrement", "increment", false, contract.OpIncrement, true, "", ""},
		{"OKTouch", "touch", false, contract.OpTouch, true, "", ""},
		{"NotFoundTouchAsRead", "touch", true, "", false, "", ""},
		{"OKAcquire", "acquire", false, contract.OpLockAcquire, true, contract.LockAcquire, contract.PurposeLock},
		{"OKElect", "elect", false, contract.OpLeaderElect, true, contract.LockAcquire, contract.PurposeLeader},
		{"OKHeartbeat", "heartbeat", false, contract.OpLeaderHeartbeat, true, contract.LockExtend, contract.PurposeLeader},
		{"OKResign", "resign", false, contract.OpLeaderResign, true, contract.LockRelease, contract.PurposeLeader},
		{"OKLockCheck", "lock", true, contract.OpLockCheck, true, "", contract.PurposeLock},
		{"OKSAdd", "sadd", false, contract.OpSAdd, true, "", contract.PurposeSet},
		{"OKSIsMember", "sismember", true, contract.OpSIsMember, true, "", contract.PurposeSet},
		{"OKSMembers", "smembers", true, contract.OpSMembers, true, "", contract.PurposeSet},
		{"NotFoundSetReadAsWrite", "scard", false, "", false, "", ""},
		{"NotFoundReadVerbAsWrite", "lock", false, "", false, "", ""},
		{"NotFoundWriteVerbAsRead", "acquire", true, "", false, "", ""},
		{"NotFoundUnknown", "explode", false, "", false, "", ""},
		{"NotFoundEmpty", "", true, "", false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, ok := opOfVerb(tc.verb, tc.read)
			if op != tc.want || ok != tc.found {
				t.Fatalf("opOfVerb(%q, %v) = %q %v, want %q %v", tc.verb, tc.read, op, ok, tc.want, tc.found)
			}
			if ok && (op.Verb() != tc.verb || op.Reads() != tc.read || op.LockAction() != tc.action || op.Purpose() != tc.purpose) {
				t.Fatalf("%s: verb %q reads %v action %q purpose %q", op, op.Verb(), op.Reads(), op.LockAction(), op.Purpose())
			}
		})
	}
}

// TestVerbList checks the form of the lists (":a, :b or :c", in the op
// table's order), not the verbs themselves: a new verb changes no line.
func TestVerbList(t *testing.T) {
	writes := verbs(false)
	colon := make([]string, len(writes))
	for i, v := range writes {
		colon[i] = ":" + v
	}
	if got, want := verbList(false, true), strings.Join(colon[:len(colon)-1], ", ")+" or "+colon[len(colon)-1]; got != want {
		t.Errorf("writes: %s, want %s", got, want)
	}
	for _, v := range []string{"increment", "acquire", "touch", "qack"} {
		if !slices.Contains(writes, v) {
			t.Errorf("writes %v lack %s", writes, v)
		}
	}
	if got := strings.Join(verbs(true), " "); !strings.HasPrefix(got, "lock leader") || strings.Contains(got, "acquire") {
		t.Errorf("reads: %s", got)
	}
}
