package stash_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eskv/eskv/stash"
	"github.com/eskv/eskv/testenv/stack"
)

// The tests run the PRD's rules (R1-R13, docs/product-requirements)
// against eskv in the test's process (testenv/stack: kfake, Postgres, writer, projector, the
// HTTP API), one stack per test. Each is named after the rule it shows.

const project = "tenant/acme/project/demo"

// mustTable opens the stash table of project on a fresh stack.
func mustTable(t *testing.T) *stash.Table {
	t.Helper()
	tb, err := stash.Open(stack.MustStart(t), stack.DevToken, project)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// mustCreate creates a stash and returns it.
func mustCreate(t *testing.T, tb *stash.Table, name, typ string, value any) *stash.Stash {
	t.Helper()
	s := &stash.Stash{Name: name, StashType: typ, Value: value}
	if err := tb.Set("", s); err != nil {
		t.Fatalf("create %s %q: %v", typ, name, err)
	}
	return s
}

// mustGet reads stash id.
func mustGet(t *testing.T, tb *stash.Table, id string) *stash.Stash {
	t.Helper()
	e, err := tb.Get(id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return e.(*stash.Stash)
}

// mustFetch fetches and type-asserts (R10.2).
func mustFetch(t *testing.T, tb *stash.Table, f map[string]any) []*stash.Stash {
	t.Helper()
	es, err := tb.Fetch(f)
	if err != nil {
		t.Fatalf("fetch %v: %v", f, err)
	}
	if es == nil {
		t.Fatalf("fetch %v: nil slice, want a non-nil one", f)
	}
	out := make([]*stash.Stash, len(es))
	for i, e := range es {
		out[i] = e.(*stash.Stash)
	}
	return out
}

// wantErr fails unless errors.Is(err, want).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err %v, want %v", what, err, want)
	}
}

// jsonOf is v as JSON, to compare values whatever Go types hold them.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestR1_1StashHasThePRDFields(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	before := time.Now()
	s := mustCreate(t, tb, "shared-config", stash.TypeContext, map[string]any{"timeout": 30})
	got := mustGet(t, tb, s.StashID)
	if got.StashID != s.StashID || got.Name != "shared-config" || got.StashType != stash.TypeContext ||
		jsonOf(t, got.Value) != `{"timeout":30}` || got.Version != 1 || !got.CreatedAt.Equal(s.CreatedAt) {
		t.Fatalf("read %+v, created %+v", got, s)
	}
	if got.CreatedAt.Before(before.Add(-time.Second)) || got.CreatedAt.After(time.Now()) {
		t.Fatalf("CreatedAt %v is not the time of the create", got.CreatedAt)
	}
}

func TestR1_2CreateGeneratesUUIDv7(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	var prev string
	for i := range 20 {
		s := mustCreate(t, tb, "s"+strings.Repeat("x", i), stash.TypeContext, nil)
		u, err := uuid.Parse(s.StashID)
		if err != nil || u.Version() != 7 || u.String() != s.StashID {
			t.Fatalf("StashID %q is not a canonical UUID v7 (%v)", s.StashID, err)
		}
		// Ids made in one millisecond stay in creation order, so the
		// stash keys list in creation order.
		if s.StashID <= prev {
			t.Fatalf("id %s after %s: not time-ordered", s.StashID, prev)
		}
		prev = s.StashID
	}
}

func TestR1_3GlobalStashHasNoScopedToLink(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	s := mustCreate(t, tb, "g", stash.TypeContext, nil)
	trail, err := tb.ScopedTo(s.StashID)
	if err != nil || trail != "" {
		t.Fatalf("ScopedTo = %q, %v; want global", trail, err)
	}
}

// TestR1_4NamesUniqueInScope: the name is reserved by the server, so of
// concurrent creates of one name exactly one succeeds; names may hold any
// characters.
func TestR1_4NamesUniqueInScope(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	names := []string{"plain", "Upper Case/with slash", "..", "über-名前 ✓", strings.Repeat("long name ", 30), "a_2f", "a/"}
	for _, n := range names {
		mustCreate(t, tb, n, stash.TypeContext, nil)
	}
	for _, n := range names {
		err := tb.Set("", &stash.Stash{Name: n, StashType: stash.TypeCounter})
		wantErr(t, "second create of "+n, err, stash.ErrDuplicateName)
		if got := mustFetch(t, tb, map[string]any{"name": n}); len(got) != 1 || got[0].Name != n {
			t.Fatalf("Fetch by name %q: %v", n, got)
		}
	}
	const racers = 10
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() { errs[i] = tb.Set("", &stash.Stash{Name: "race", StashType: stash.TypeContext}) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		} else {
			wantErr(t, "racing create", err, stash.ErrDuplicateName)
		}
	}
	if won != 1 || len(mustFetch(t, tb, map[string]any{"name": "race"})) != 1 {
		t.Fatalf("%d racing creates won; want exactly 1", won)
	}
	// A rename moves the reservation: the old name is free, the new one
	// taken, a rename onto a taken name fails and changes nothing.
	s := mustGet(t, tb, mustFetch(t, tb, map[string]any{"name": "plain"})[0].StashID)
	s.Name = "renamed"
	if err := tb.Set(s.StashID, s); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, tb, "plain", stash.TypeContext, nil)
	s.Name = "race"
	wantErr(t, "rename onto a taken name", tb.Set(s.StashID, s), stash.ErrDuplicateName)
	if got := mustGet(t, tb, s.StashID); got.Name != "renamed" || got.Version != 2 {
		t.Fatalf("after a refused rename: %+v", got)
	}
}

func TestR1_5EmptyNameRejected(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	wantErr(t, "create", tb.Set("", &stash.Stash{StashType: stash.TypeContext}), stash.ErrInvalidName)
	s := mustCreate(t, tb, "n", stash.TypeContext, nil)
	s.Name = ""
	wantErr(t, "rename to empty", tb.Set(s.StashID, s), stash.ErrInvalidName)
	if n := len(mustFetch(t, tb, nil)); n != 1 {
		t.Fatalf("%d stashes; want only the valid one", n)
	}
}

// TestR1_6VersionStartsAt1AndIncrements: 1 at create, +1 per persisted
// mutation; the entity methods count in memory as well; a deleted
// stash's id is never reused, so a version never goes back.
func TestR1_6VersionStartsAt1AndIncrements(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	s := mustCreate(t, tb, "c", stash.TypeCounter, nil)
	if s.Version != 1 {
		t.Fatalf("version %d at create", s.Version)
	}
	for want := int64(2); want <= 4; want++ {
		if _, err := s.Increment(1); err != nil {
			t.Fatal(err)
		}
		if s.Version != want {
			t.Fatalf("in memory: version %d, want %d", s.Version, want)
		}
		if err := tb.Set(s.StashID, s); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, tb, s.StashID).Version; got != want || s.Version != want {
			t.Fatalf("stored version %d (struct %d), want %d", got, s.Version, want)
		}
	}
	// Two mutations before one Set persist as one version.
	s.Increment(1)
	s.Increment(1)
	if s.Version != 6 {
		t.Fatalf("in memory after two increments: %d", s.Version)
	}
	if err := tb.Set(s.StashID, s); err != nil || s.Version != 5 {
		t.Fatalf("Set: %v, version %d; want 5", err, s.Version)
	}
}

func TestR1_7ValueIsAJSONBlob(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	v := map[string]any{"list": []any{1, "two", nil}, "nested": map[string]any{"big": int64(1) << 60, "f": 1.5}}
	s := mustCreate(t, tb, "blob", stash.TypeContext, v)
	if got := jsonOf(t, mustGet(t, tb, s.StashID).Value); got != jsonOf(t, v) {
		t.Fatalf("read back %s, want %s", got, jsonOf(t, v))
	}
	err := tb.Set("", &stash.Stash{Name: "chan", StashType: stash.TypeContext, Value: map[string]any{"c": make(chan int)}})
	wantErr(t, "a value JSON cannot hold", err, stash.ErrInvalidValue)
}
