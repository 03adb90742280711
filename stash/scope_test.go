package stash_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/eskv/eskv/stash"
)

// TestR13_ScopeToATrail: one scoped_to link per stash (server-enforced),
// ScopedTo and StashesInTrail answer it, the version does not move.
func TestR13_ScopeToATrail(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	a := mustCreate(t, tb, "a", stash.TypeContext, nil)
	b := mustCreate(t, tb, "b", stash.TypeCounter, nil)
	g := mustCreate(t, tb, "g", stash.TypeLock, nil)
	for _, s := range []*stash.Stash{b, a} {
		if err := tb.ScopeTo(s.StashID, "trail-1"); err != nil {
			t.Fatal(err)
		}
	}
	wantErr(t, "a second link", tb.ScopeTo(a.StashID, "trail-2"), stash.ErrAlreadyScoped)
	wantErr(t, "empty trail", tb.ScopeTo(g.StashID, ""), stash.ErrInvalidID)
	wantErr(t, "unknown stash", tb.ScopeTo("0190b8a2-7c1e-7000-8000-000000000000", "trail-1"), stash.ErrNotFound)
	for s, want := range map[*stash.Stash]string{a: "trail-1", b: "trail-1", g: ""} {
		if got, err := tb.ScopedTo(s.StashID); err != nil || got != want {
			t.Fatalf("ScopedTo(%s) = %q, %v; want %q", s.Name, got, err, want)
		}
	}
	ids, err := tb.StashesInTrail("trail-1")
	if err != nil || !slices.Equal(ids, []string{a.StashID, b.StashID}) {
		t.Fatalf("StashesInTrail = %v, %v; want a, b in creation order", ids, err)
	}
	if ids, err := tb.StashesInTrail("trail-2"); err != nil || ids == nil || len(ids) != 0 {
		t.Fatalf("StashesInTrail(trail-2) = %#v, %v; want empty", ids, err)
	}
	if got := mustGet(t, tb, a.StashID).Version; got != 1 {
		t.Fatalf("scoping moved the version to %d", got)
	}
	got := mustFetch(t, tb, map[string]any{"trail_id": "trail-1", "stash_type": "counter"})
	if len(got) != 1 || got[0].StashID != b.StashID {
		t.Fatalf("Fetch by trail_id: %v", got)
	}
}

// TestR13_1NamesUniqueWithinATrail (R1.4): a name is reserved per scope.
// Scoping frees the global name; a trail takes a name once.
func TestR13_1NamesUniqueWithinATrail(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	first := mustCreate(t, tb, "config", stash.TypeContext, nil)
	if err := tb.ScopeTo(first.StashID, "trail-1"); err != nil {
		t.Fatal(err)
	}
	second := mustCreate(t, tb, "config", stash.TypeContext, nil) // global again
	wantErr(t, "same name into the same trail", tb.ScopeTo(second.StashID, "trail-1"), stash.ErrDuplicateName)
	if trail, _ := tb.ScopedTo(second.StashID); trail != "" {
		t.Fatalf("a refused ScopeTo left a link to %q", trail)
	}
	if err := tb.ScopeTo(second.StashID, "trail-2"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, tb, "config", stash.TypeContext, nil) // and global once more
	// A rename inside a trail checks the trail's names only.
	other := mustCreate(t, tb, "other", stash.TypeContext, nil)
	if err := tb.ScopeTo(other.StashID, "trail-1"); err != nil {
		t.Fatal(err)
	}
	other.Name = "config"
	wantErr(t, "rename onto a trail's name", tb.Set(other.StashID, other), stash.ErrDuplicateName)
	other.Name = "other-2"
	if err := tb.Set(other.StashID, other); err != nil {
		t.Fatal(err)
	}
	if len(mustFetch(t, tb, map[string]any{"name": "config"})) != 3 {
		t.Fatal("want three stashes named config: one per scope")
	}
}

// TestR13_2ConcurrentScopeToOneWins: racing links of one stash to
// different trails: the server keeps exactly one.
func TestR13_2ConcurrentScopeToOneWins(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	s := mustCreate(t, tb, "contested", stash.TypeContext, nil)
	trails := []string{"t1", "t2", "t3", "t4", "t5", "t6"}
	errs := make([]error, len(trails))
	var wg sync.WaitGroup
	for i, trail := range trails {
		wg.Go(func() { errs[i] = tb.ScopeTo(s.StashID, trail) })
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		if err == nil {
			if winner != "" {
				t.Fatalf("both %s and %s won", winner, trails[i])
			}
			winner = trails[i]
		}
	}
	if got, err := tb.ScopedTo(s.StashID); err != nil || winner == "" || got != winner {
		t.Fatalf("ScopedTo = %q, %v; winner %q (errors %v)", got, err, winner, errs)
	}
}
