package writer

import (
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestStates: States answers the keys of one partition in the order
// asked, as State answers each (a key never written has the zero state);
// the keys neither the overlay nor the state cache hold are read from
// the projection in one query, and cached.
func TestStates(t *testing.T) {
	t.Parallel()
	w, proj := projectedWriter(t, Config{SweepInterval: -1})
	ctx := t.Context()
	a, b, missing := mustKey(t, "tenant/a/project/b/a"), mustKey(t, "tenant/a/project/b/b"), mustKey(t, "tenant/a/project/b/missing")
	if _, err := cas(ctx, w, a, 0, `1`); err != nil {
		t.Fatal(err)
	}
	if _, err := cas(ctx, w, b, 0, `"two"`); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		states, at, err := w.States(ctx, []contract.Key{b, missing, a})
		if err != nil || len(states) != 3 {
			t.Fatalf("%s: States = %+v, %v", when, states, err)
		}
		// Nothing is written meanwhile: the position is the one a GET
		// of a key of the partition answers.
		if _, one, err := w.StateAt(ctx, a); err != nil || at != one || at.Offset < 1 {
			t.Errorf("%s: States at %v, StateAt at %v (%v); want the same position, past both writes", when, at, one, err)
		}
		if s := states[0]; s.Version != 1 || string(s.Entry.Value) != `"two"` {
			t.Errorf("%s: b = %+v", when, s)
		}
		if s := states[1]; s.Version != 0 || s.Live {
			t.Errorf("%s: missing = %+v, want the zero state", when, s)
		}
		if s := states[2]; s.Version != 1 || string(s.Entry.Value) != `1` {
			t.Errorf("%s: a = %+v", when, s)
		}
	}
	check("from the overlay")
	awaitTrimmed(t, w, a, b)
	_, p := w.partition(a)
	p.mu.Lock()
	p.cache.Reset() // as if evicted
	p.mu.Unlock()
	before := proj.lookups.Load()
	check("from the projection")
	if n := proj.lookups.Load() - before; n != 1 {
		t.Errorf("States read the projection %d times, want once", n)
	}
	if _, ok, _ := p.lookup(a.String()); !ok {
		t.Errorf("a read from the projection is not cached")
	}
	if got, _, err := w.States(ctx, nil); err != nil || got != nil {
		t.Errorf("States of no key = %v, %v", got, err)
	}
}
