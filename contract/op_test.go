package contract

import (
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

func TestVerbList(t *testing.T) {
	if got := VerbList(false, true); got != ":increment, :touch, :acquire, :extend, :release, :elect, :heartbeat, :resign, :sadd, :srem, :lpush, :rpush, :lpop, :rpop, :ltrim, :qpush, :qpop or :qack" {
		t.Errorf("writes: %s", got)
	}
	if got := strings.Join(Verbs(true), " "); !strings.HasPrefix(got, "lock leader") {
		t.Errorf("reads: %s", got)
	}
}
