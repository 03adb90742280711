package stash_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/stash"
)

// TestR6_LockAcquireAndRelease: the PRD's R6 rules and its R6.4 example.
func TestR6_LockAcquireAndRelease(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	id := mustCreate(t, tb, "deploy", stash.TypeLock, nil).StashID
	s := mustGet(t, tb, id)
	wantErr(t, "empty holder", s.Acquire(""), stash.ErrInvalidHolder)
	wantErr(t, "release of a free lock", s.Release("worker-1"), stash.ErrNotLockHolder)
	if err := s.Acquire("worker-1"); err != nil {
		t.Fatal(err)
	}
	if err := tb.Set(s.StashID, s); err != nil {
		t.Fatal(err)
	}
	held := mustGet(t, tb, id)
	v, _ := held.GetValue().(map[string]any)
	if v["holder"] != "worker-1" || v["acquired_at"] == nil || held.Version != 2 {
		t.Fatalf("acquired lock reads %+v", held)
	}
	if err := held.Acquire("worker-1"); err != nil || held.Version != 3 || held.GetValue().(map[string]any)["acquired_at"] != v["acquired_at"] {
		t.Fatalf("reentrant Acquire: %v, %+v", err, held)
	}
	other := mustGet(t, tb, id)
	wantErr(t, "Acquire of a held lock", other.Acquire("worker-2"), stash.ErrLockHeld)
	wantErr(t, "Release by a non-holder", other.Release("worker-2"), stash.ErrNotLockHolder)
	if err := other.Release("worker-1"); err != nil || other.GetValue() != nil {
		t.Fatalf("Release: %v, value %v", err, other.GetValue())
	}
	if err := tb.Set(id, other); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, tb, id); got.GetValue() != nil || got.Version != 3 {
		t.Fatalf("released lock reads %+v", got)
	}
}

// TestR6_2TwoWorkersAcquireFromOneVersion: both acquire in memory; only
// one Set wins, and the other, reading again, finds the lock held.
func TestR6_2TwoWorkersAcquireFromOneVersion(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	id := mustCreate(t, tb, "l", stash.TypeLock, nil).StashID
	const workers = 8
	var wg sync.WaitGroup
	errs := make([]error, workers)
	read := make([]*stash.Stash, workers)
	for i := range workers {
		read[i] = mustGet(t, tb, id)
		if err := read[i].Acquire(fmt.Sprintf("w%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range read {
		wg.Go(func() { errs[i] = tb.Set(id, s) })
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		if err == nil {
			if winner != "" {
				t.Fatalf("%s and w%d both hold the lock", winner, i)
			}
			winner = fmt.Sprintf("w%d", i)
			continue
		}
		wantErr(t, "losing acquire", err, stash.ErrConflict)
	}
	s := mustGet(t, tb, id)
	if winner == "" || s.GetValue().(map[string]any)["holder"] != winner {
		t.Fatalf("winner %q, stored %+v", winner, s)
	}
	wantErr(t, "acquire after losing", s.Acquire("w-late"), stash.ErrLockHeld)
}

func TestR8_GetByID(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	s := mustCreate(t, tb, "x", stash.TypeContext, nil)
	_, err := tb.Get("")
	wantErr(t, "empty id", err, stash.ErrInvalidID)
	for _, id := range []string{"0190b8a2-7c1e-7000-8000-000000000000", "not-a-uuid"} {
		_, err := tb.Get(id)
		wantErr(t, "unknown id "+id, err, stash.ErrNotFound)
	}
	e, err := tb.Get(s.StashID)
	if got, ok := e.(*stash.Stash); err != nil || !ok || got.StashID != s.StashID {
		t.Fatalf("Get = %T %v, %v", e, e, err)
	}
}

// TestR9_FetchFilters: stash_type, name, limit, offset, ANDed; unknown
// keys ignored; CreatedAt order; empty non-nil slices (R10.3).
func TestR9_FetchFilters(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	if got := mustFetch(t, tb, nil); len(got) != 0 {
		t.Fatalf("fetch of an empty table: %v", got)
	}
	var created []string
	for i := range 9 {
		typ := []string{stash.TypeCounter, stash.TypeLock, stash.TypeContext}[i%3]
		created = append(created, mustCreate(t, tb, fmt.Sprintf("s%d", i), typ, nil).StashID)
	}
	ids := func(f map[string]any) string {
		out := ""
		for _, s := range mustFetch(t, tb, f) {
			for i, id := range created {
				if s.StashID == id {
					out += fmt.Sprint(i)
				}
			}
		}
		return out
	}
	name := "s4"
	for _, c := range []struct {
		f    map[string]any
		want string
	}{
		{nil, "012345678"},
		{map[string]any{}, "012345678"},
		{map[string]any{"stash_type": "lock"}, "147"},
		{map[string]any{"stash_type": "queue"}, ""},
		{map[string]any{"name": "s4"}, "4"},
		{map[string]any{"name": &name, "stash_type": "lock"}, "4"},
		{map[string]any{"name": "s4", "stash_type": "counter"}, ""},
		{map[string]any{"name": "nope"}, ""},
		{map[string]any{"limit": 3}, "012"},
		{map[string]any{"limit": 0, "offset": 7}, "78"},
		{map[string]any{"stash_type": "counter", "offset": 1, "limit": int64(1)}, "3"},
		{map[string]any{"offset": 20}, ""},
		{map[string]any{"colour": "red", "trail_id": (*string)(nil), "stash_type": (*string)(nil)}, "012345678"},
	} {
		if got := ids(c.f); got != c.want {
			t.Errorf("Fetch(%v) = %q, want %q", c.f, got, c.want)
		}
	}
	for _, f := range []map[string]any{{"limit": -1}, {"offset": "2"}, {"stash_type": 5}} {
		_, err := tb.Fetch(f)
		wantErr(t, fmt.Sprint(f), err, stash.ErrInvalidFilter)
	}
}

// TestR11_DeleteRemovesAtomically: the stash, its name and its link go
// together; Get and History no longer know it; the name is free again.
func TestR11_DeleteRemovesAtomically(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	wantErr(t, "empty id", tb.Delete(""), stash.ErrInvalidID)
	wantErr(t, "unknown id", tb.Delete("0190b8a2-7c1e-7000-8000-000000000000"), stash.ErrNotFound)
	for _, trail := range []string{"", "trail-1"} {
		s := mustCreate(t, tb, "doomed", stash.TypeCounter, nil)
		if trail != "" {
			if err := tb.ScopeTo(s.StashID, trail); err != nil {
				t.Fatal(err)
			}
		}
		if err := tb.Delete(s.StashID); err != nil {
			t.Fatal(err)
		}
		_, err := tb.Get(s.StashID)
		wantErr(t, "Get after Delete", err, stash.ErrNotFound)
		_, err = tb.History(s.StashID)
		wantErr(t, "History after Delete", err, stash.ErrNotFound)
		_, err = tb.ScopedTo(s.StashID)
		wantErr(t, "ScopedTo after Delete", err, stash.ErrNotFound)
		wantErr(t, "second Delete", tb.Delete(s.StashID), stash.ErrNotFound)
		wantErr(t, "Set after Delete", tb.Set(s.StashID, s), stash.ErrNotFound)
		if ids, err := tb.StashesInTrail("trail-1"); err != nil || len(ids) != 0 {
			t.Fatalf("trail after Delete: %v, %v", ids, err)
		}
	}
	again := mustCreate(t, tb, "doomed", stash.TypeContext, nil) // the name is free
	if got := mustFetch(t, tb, nil); len(got) != 1 || got[0].StashID != again.StashID {
		t.Fatalf("after deletes: %v", got)
	}
	if h, err := tb.History(again.StashID); err != nil || len(h) != 1 || h[0].Operation != stash.StashOpCreate {
		t.Fatalf("history of the re-created name: %+v, %v; want its create only", h, err)
	}
}

// TestR11_5DeleteRefusesAHeldLock: decided on the version read.
func TestR11_5DeleteRefusesAHeldLock(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	s := mustCreate(t, tb, "l", stash.TypeLock, nil)
	if err := s.Acquire("w"); err != nil {
		t.Fatal(err)
	}
	if err := tb.Set(s.StashID, s); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Delete of a held lock", tb.Delete(s.StashID), stash.ErrLockHeld)
	if mustGet(t, tb, s.StashID).Version != 2 {
		t.Fatal("a refused Delete changed the lock")
	}
	if err := s.Release("w"); err != nil {
		t.Fatal(err)
	}
	if err := tb.Set(s.StashID, s); err != nil {
		t.Fatal(err)
	}
	if err := tb.Delete(s.StashID); err != nil {
		t.Fatalf("Delete of a released lock: %v", err)
	}
}

// TestR12_ErrorsAreCheckableWithErrorsIs: sentinels through the wrapping;
// the API's and the network's errors stay reachable with errors.As.
func TestR12_ErrorsAreCheckableWithErrorsIs(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	_, err := tb.Get("0190b8a2-7c1e-7000-8000-000000000000")
	var ae *contract.Error
	if !errors.Is(err, stash.ErrNotFound) || !errors.As(err, &ae) || ae.Code != contract.ENotFound {
		t.Fatalf("not found: %v", err)
	}
	down, err := stash.Open("http://127.0.0.1:1", "t", project)
	if err != nil {
		t.Fatal(err)
	}
	_, err = down.Fetch(nil)
	var ne *client.NetworkError
	if !errors.As(err, &ne) {
		t.Fatalf("unreachable server: %v, want a *client.NetworkError inside", err)
	}
	for _, p := range []string{"", "tenant/acme", "tenant/acme/project/p/extra", "tenant/Acme/project/p"} {
		if _, err := stash.Open("http://x", "t", p); err == nil {
			t.Errorf("Open with project %q: no error", p)
		}
	}
}
