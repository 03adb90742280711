package writer

import (
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/testenv"
)

// TestElementOverlay: the overlay entry of a set key remembers each
// member's unprojected change, so a batch decides on it without asking
// the projection; it goes with the entry.
func TestElementOverlay(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	key := mustKey(t, "tenant/a/project/b/s")
	var o overlayEntry
	var cur keystate.State
	for i, step := range []struct {
		op     contract.Op
		member string
	}{{contract.OpSAdd, "a"}, {contract.OpSAdd, "b"}, {contract.OpSRem, "a"}} {
		r := decide.Set{Header: decide.Header{Key: key, Op: step.op}, Member: step.member}
		d := r.Decide(decide.Input{State: cur, Element: decide.ElementRow{Version: o.elems[step.member]}}, testEnv(now, 1))
		if d.Event == nil {
			t.Fatalf("step %d appended nothing: %v", i, d.Err)
		}
		o = o.next(d.Event, int64(i), testWindow)
		cur = o.state
	}
	if o.elems["a"] != 0 || o.elems["b"] != 2 || len(o.elems) != 2 {
		t.Fatalf("elems %v, want a removed and b added at 2", o.elems)
	}
	if a, _ := decide.ReadIsMember(key, cur.Visible(now), o.elems["b"]); !a.IsMember {
		t.Fatal("b is not a member")
	}
	if c, _ := decide.ReadCard(key, cur.Visible(now)); c.Size != 1 {
		t.Fatalf("size %d, want 1", c.Size)
	}
}

// TestSetMembersFollowThePartition: a new owner of the partition knows the
// membership of members whose changes the projection does not hold yet
// (its overlay is rebuilt from the log): nothing is projected here, and
// it decides and answers from what catch-up read.
func TestSetMembersFollowThePartition(t *testing.T) {
	t.Parallel()
	broker := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	a, runA := startWriter(t, broker, store, Config{InstanceID: "a"})
	testenv.WaitFor(t, 30*time.Second, "writer a ready", a.Ready)
	ctx := t.Context()
	set := mustKey(t, "tenant/a/project/b/agents")
	req := func(op contract.Op, m string) *decide.Set {
		return &decide.Set{Header: decide.Header{Key: set, Op: op, Principal: "p"}, Member: m}
	}
	for _, r := range []*decide.Set{req(contract.OpSAdd, "x"), req(contract.OpSAdd, "y"), req(contract.OpSRem, "x")} {
		if res, err := a.Do(ctx, r); err != nil || !res.Changed {
			t.Fatalf("%s %s: %+v %v", r.Op, r.Member, res, err)
		}
	}
	if err := runA.Stop(t); err != nil {
		t.Fatalf("writer a: %v", err)
	}

	b := runWriter(t, broker, store, Config{InstanceID: "b"})
	testenv.WaitFor(t, 30*time.Second, "writer b ready", b.Ready)
	for _, step := range []struct {
		r       *decide.Set
		changed bool
		version int64
	}{
		{req(contract.OpSAdd, "y"), false, 3}, // still there
		{req(contract.OpSRem, "x"), false, 3}, // already gone
		{req(contract.OpSAdd, "x"), true, 4},
	} {
		res, err := b.Do(ctx, step.r)
		if err != nil || res.Changed != step.changed || res.Entry.Version != step.version {
			t.Fatalf("%s %s on the new owner: %+v %v, want changed %v at version %d", step.r.Op, step.r.Member, res, err, step.changed, step.version)
		}
	}
	for m, want := range map[string]bool{"x": true, "y": true, "z": false} {
		st, elem, err := b.Member(ctx, set, m)
		if err != nil {
			t.Fatal(err)
		}
		if a, err := decide.ReadIsMember(set, st.Visible(time.Now()), elem); err != nil || a.IsMember != want {
			t.Fatalf("sismember %s: %+v %v, want %v", m, a, err, want)
		}
	}
}
