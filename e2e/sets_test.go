package e2e

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// TestSetConcurrentAddRemove: 32 clients add and remove members of one
// set at once (a small pool of members, so adds and removes of the same
// member race). Afterwards the members (smembers, every page) are
// exactly those the log implies (its element changes folded in version
// order), scard equals their count, sismember agrees for every member of
// the pool, and the versions of the set are contiguous: each answer that
// said "added" or "removed" is one event, and no other answer appended
// one.
func TestSetConcurrentAddRemove(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := client.New(s.url, devToken)
	set := "tenant/acme/project/demo/sets/active-agents"
	const clients, pool = 32, 40
	ops := 60
	if testing.Short() {
		ops = 15
	}
	member := func(i int) string { return fmt.Sprintf("agent %02d/é?", i) }
	var (
		mu      sync.Mutex
		changed int
		wg      sync.WaitGroup
	)
	for cl := range clients {
		wg.Go(func() {
			for i := range ops {
				m := member((cl*7 + i*13) % pool)
				var (
					a   client.SetChange
					err error
				)
				if (cl+i)%3 == 0 {
					a, err = c.SRem(t.Context(), client.SetRequest{Key: set, Member: m})
				} else {
					a, err = c.SAdd(t.Context(), client.SetRequest{Key: set, Member: m})
				}
				if err != nil {
					t.Errorf("client %d op %d: %v", cl, i, err)
					return
				}
				mu.Lock()
				if (a.Added != nil && *a.Added) || (a.Removed != nil && *a.Removed) {
					changed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Fold the log's element changes of the set, in version order.
	want := map[string]bool{}
	var versions []int64
	for _, e := range s.readLog(t.Context()) {
		if e.Key != set {
			continue
		}
		versions = append(versions, e.Version)
		switch {
		case e.Element == nil:
			t.Fatalf("event %d of the set has no element", e.Version)
		case e.Element.Op == contract.ElementAdd:
			want[e.Element.Member] = true
		default:
			delete(want, e.Element.Member)
		}
		meta, err := contract.ParseCollectionMeta(e.After)
		if err != nil || meta.Size != int64(len(want)) {
			t.Fatalf("event %d: metadata %s (%v), but the fold holds %d members", e.Version, e.After, err, len(want))
		}
	}
	if len(versions) != changed {
		t.Fatalf("%d events on the set, but %d answers said added or removed", len(versions), changed)
	}
	for i, v := range versions {
		if v != int64(i+1) {
			t.Fatalf("versions %v are not contiguous from 1", versions)
		}
	}

	var got []string
	for m, err := range c.SMembers(t.Context(), set) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	if exp := slices.Sorted(maps.Keys(want)); !slices.Equal(got, exp) {
		t.Fatalf("smembers %q,\nthe log implies %q", got, exp)
	}
	n, err := c.SCard(t.Context(), set)
	if err != nil || n != int64(len(want)) {
		t.Fatalf("scard %d (%v), want %d", n, err, len(want))
	}
	for i := range pool {
		in, err := c.SIsMember(t.Context(), set, member(i))
		if err != nil || in != want[member(i)] {
			t.Fatalf("sismember %q: %v (%v), the log says %v", member(i), in, err, want[member(i)])
		}
	}
	t.Logf("%d clients x %d ops: %d events, %d members at the end", clients, ops, len(versions), len(want))
}
