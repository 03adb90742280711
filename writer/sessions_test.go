package writer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/testenv"
)

// TestSessionEndReadsAttachedKeys: a session's end deletes the keys and
// releases the locks attached to it, also once the projector applied
// them and trim dropped them from the overlay (the batch reads them from
// the state cache or the projection: attachedOfSessions), and leaves a
// key rewritten since without the session; the sweeper's expiry of a
// session ends it the same way.
func TestSessionEndReadsAttachedKeys(t *testing.T) {
	t.Parallel()
	w, _ := projectedWriter(t, Config{SweepInterval: 200 * time.Millisecond})
	ctx := t.Context()
	do := func(c decide.Command) decide.Result {
		t.Helper()
		res, err := w.Do(ctx, c)
		if err != nil {
			t.Fatalf("%s %s: %v", c.Head().Op, c.Head().Key, err)
		}
		return res
	}
	create := func(k contract.Key, ttl int64) {
		do(&decide.KV{Header: decide.Header{Key: k, Op: contract.OpSessionCreate, Principal: "p"}, TTLSeconds: ttl, ExpectedVersion: new(int64)})
	}
	put := func(k contract.Key, session string) {
		do(&decide.KV{Header: decide.Header{Key: k, Op: contract.OpPut, Principal: "p"}, Value: json.RawMessage(`"up"`), Session: session})
	}
	live := func(k contract.Key) bool {
		t.Helper()
		st, err := w.State(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return st.Visible(time.Now()) != nil
	}
	s, k1, k2, l := mustKey(t, "tenant/a/project/b/s"), mustKey(t, "tenant/a/project/b/k1"), mustKey(t, "tenant/a/project/b/k2"), mustKey(t, "tenant/a/project/b/l")
	create(s, 600)
	put(k1, s.String())
	put(k2, s.String())
	do(&decide.Lock{Header: decide.Header{Key: l, Op: contract.OpLockAcquire, Principal: "p"}, Holder: "h", Session: s.String()})
	put(k2, "") // rewritten without the session: no longer its
	awaitTrimmed(t, w, k1, k2, l, s)

	t.Run("OKRevokeEndsAttached", func(t *testing.T) {
		res := do(&decide.KV{Header: decide.Header{Key: s, Op: contract.OpSessionRevoke, Principal: "p"}})
		if len(res.Session.Ended) != 2 {
			t.Fatalf("ended %v, want k1 and l", res.Session.Ended)
		}
		if live(k1) || live(l) || !live(k2) || live(s) {
			t.Fatalf("after revoke: k1 %v l %v k2 %v s %v; want only k2", live(k1), live(l), live(k2), live(s))
		}
	})
	t.Run("OKExpiryEndsAttached", func(t *testing.T) {
		s2, k3 := mustKey(t, "tenant/a/project/b/s2"), mustKey(t, "tenant/a/project/b/k3")
		create(s2, 1)
		put(k3, s2.String())
		testenv.WaitFor(t, 20*time.Second, "the sweeper ends s2 and deletes k3", func() bool { return !live(k3) })
		st, err := w.State(ctx, s2)
		if err != nil || st.Live {
			t.Fatalf("session s2 after k3's delete: %+v %v; want ended in the same transaction", st, err)
		}
	})
}
