package stash

import (
	"errors"
	"strings"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestNameKeysAreValidAndDistinct: any name gets a valid eskv key, and
// different names or scopes different keys.
func TestNameKeysAreValidAndDistinct(t *testing.T) {
	t.Parallel()
	tb := &Table{project: "tenant/acme/project/" + strings.Repeat("p", 40)}
	names := []string{"a", "A", "a_41", "_41", "..", ".", "a/b", "a b", "ü", "\x00", strings.Repeat("n", 200), strings.Repeat("n", 201), "g", "t-g"}
	seen := map[string]string{}
	for _, scope := range []string{globalScope, "g", "trail-1", strings.Repeat("t", 100)} {
		for _, n := range names {
			k := tb.nameKey(scope, n)
			if _, err := contract.ParseKey(k); err != nil {
				t.Fatalf("name %q in scope %q: key %q: %v", n, scope, k, err)
			}
			if prev, dup := seen[k]; dup {
				t.Fatalf("%q and %q share key %s", prev, scope+"|"+n, k)
			}
			seen[k] = scope + "|" + n
		}
	}
	if _, err := Open("http://x", "t", "tenant/a/project/"+strings.Repeat("p", maxProjectLen)); err == nil {
		t.Fatal("Open took a project too long for its keys")
	}
	longest := &Table{project: "tenant/a/project/" + strings.Repeat("p", maxProjectLen-len("tenant/a/project/"))}
	id, _ := newID()
	for _, k := range []string{longest.stashKey(id), longest.linkKey(id), longest.nameKey(strings.Repeat("t", 300), strings.Repeat("n", 300))} {
		if _, err := contract.ParseKey(k); err != nil {
			t.Fatalf("project of %d characters: key %s: %v", maxProjectLen, k, err)
		}
	}
}

// TestR11_6DeleteOfALockAcquiredMeanwhileConflicts: Delete decides on
// the version it read; a lock acquired after that read makes the
// transaction fail, so a held lock is never deleted.
func TestR11_6DeleteOfALockAcquiredMeanwhileConflicts(t *testing.T) {
	t.Parallel()
	tb, err := Open(stack.MustStart(t), stack.DevToken, "tenant/acme/project/demo")
	if err != nil {
		t.Fatal(err)
	}
	l := &Stash{Name: "l", StashType: TypeLock}
	if err := tb.Set("", l); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	stale, err := tb.get(ctx, l.StashID)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Acquire("w"); err != nil {
		t.Fatal(err)
	}
	if err := tb.Set(l.StashID, l); err != nil {
		t.Fatal(err)
	}
	if err := tb.deleteRead(ctx, stale); !errors.Is(err, ErrConflict) {
		t.Fatalf("delete from the free version: %v, want ErrConflict", err)
	}
	if _, err := tb.Get(l.StashID); err != nil {
		t.Fatalf("the held lock is gone: %v", err)
	}
}

// TestStashKeysListInCreationOrder: UUID v7 ids made within one
// millisecond still list in creation order (key byte order), as
// StashesInTrail relies on.
func TestStashKeysListInCreationOrder(t *testing.T) {
	t.Parallel()
	base := stack.MustStart(t)
	tb, err := Open(base, stack.DevToken, "tenant/acme/project/demo")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 300 {
		id, err := newID()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	c := client.New(base, stack.DevToken)
	for _, i := range []int{5, 0, 299, 150, 151, 2, 1} { // written out of order
		if _, err := c.Put(t.Context(), client.PutRequest{Key: tb.stashKey(ids[i]), Value: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for e, err := range c.ListAll(t.Context(), client.ListOptions{Prefix: tb.project + stashDir}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.TrimPrefix(e.Key, tb.project+stashDir))
	}
	want := []string{ids[0], ids[1], ids[2], ids[5], ids[150], ids[151], ids[299]}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

// TestStashKeysCarrySemantics: the keys a table creates say what they
// are for (the semantic-KV seed's envelope).
func TestStashKeysCarrySemantics(t *testing.T) {
	t.Parallel()
	tb, err := Open(stack.MustStart(t), stack.DevToken, "tenant/acme/project/demo")
	if err != nil {
		t.Fatal(err)
	}
	for typ, purpose := range map[string]string{TypeCounter: "counter", TypeContext: "config", TypeLock: "other"} {
		s := &Stash{Name: typ, StashType: typ}
		if err := tb.Set("", s); err != nil {
			t.Fatal(err)
		}
		for key, want := range map[string]string{tb.stashKey(s.StashID): purpose, tb.nameKey(globalScope, typ): "other"} {
			e, err := tb.c.Get(t.Context(), key)
			if err != nil || e.Semantics.Purpose != want || e.Semantics.Producer != producer {
				t.Fatalf("%s: %+v, %v; want purpose %s by %s", key, e.Semantics, err, want, producer)
			}
		}
	}
}
