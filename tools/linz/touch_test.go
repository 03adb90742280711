package linz

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func touch(client int, key string, expected, call, ret int64, out Output) Op {
	return Op{Client: client, In: Input{Key: key, Kind: Touch, Expected: expected}, Out: out, Call: call, Return: ret, RequestID: "t"}
}

// TestTouchModel: a touch is a write of the value the register holds: it
// moves the version and keeps the value, never creates the key, and
// conflicts as a CAS write does.
func TestTouchModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    []Op
		want porcupine.CheckResult
	}{
		{"OKTouchKeepsValue", []Op{
			write(0, k1, 0, "a", 0, 1, ok(1, "a")),
			touch(1, k1, 1, 2, 3, ok(2, "a")),
			read(0, k1, 4, 5, ok(2, "a")),
			write(1, k1, 2, "b", 6, 7, ok(3, "b")),
		}, porcupine.Ok},
		{"OKTouchConflict", []Op{
			write(0, k1, 0, "a", 0, 1, ok(1, "a")),
			write(0, k1, 1, "b", 2, 3, ok(2, "b")),
			touch(1, k1, 1, 4, 5, conflict(2, "b")),
		}, porcupine.Ok},
		{"OKUnknownTouchApplied", []Op{
			write(0, k1, 0, "a", 0, 1, ok(1, "a")),
			touch(1, k1, 1, 2, 3, unknown),
			read(0, k1, 4, 5, ok(2, "a")),
		}, porcupine.Ok},
		{"OKUnknownTouchNotApplied", []Op{
			write(0, k1, 0, "a", 0, 1, ok(1, "a")),
			touch(1, k1, 1, 2, 3, unknown),
			write(0, k1, 1, "b", 4, 5, ok(2, "b")),
		}, porcupine.Ok},
		{"ErrTouchChangedValue", []Op{
			write(0, k1, 0, "a", 0, 1, ok(1, "a")),
			touch(1, k1, 1, 2, 3, ok(2, "b")),
		}, porcupine.Illegal},
		{"ErrStaleReadAfterTouch", []Op{
			write(0, k1, 0, "a", 0, 1, ok(1, "a")),
			touch(1, k1, 1, 2, 3, ok(2, "a")),
			read(0, k1, 4, 5, ok(1, "a")),
		}, porcupine.Illegal},
		{"ErrTouchCreated", []Op{
			touch(1, k1, 0, 0, 1, ok(1, "")),
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := Check(tc.h, 10*time.Second); r.Result != tc.want {
				t.Fatalf("%v, want %v", r.Result, tc.want)
			}
		})
	}
}

// TestResolveTouch: an unknown touch is settled by the log (its version
// and the value it kept), and counts as a put for the listing check.
func TestResolveTouch(t *testing.T) {
	h := []Op{
		write(0, k1, 0, "a", 0, 1, ok(1, "a")),
		touch(1, k1, 1, 2, 3, unknown),
		read(2, k1, 10, 11, ok(2, "a")),
	}
	committed := func(o Op) (int64, string, bool) {
		if o.In.Kind == Touch && o.RequestID == "t" {
			return 2, "a", true
		}
		return 0, "", false
	}
	if applied, failedN := Resolve(h, committed); applied != 1 || failedN != 0 || !h[1].Settled || h[1].Out != ok(2, "a") {
		t.Fatalf("applied %d failed %d, history %+v", applied, failedN, h)
	}
	if r := Check(h, 10*time.Second); r.Result != porcupine.Ok {
		t.Fatalf("%v, want linearizable", r.Result)
	}
	if cs := Changes(h); len(cs) != 2 || cs[1].Version != 2 || cs[1].Delete {
		t.Fatalf("changes %+v: want the touch as a put of v2", cs)
	}
}
