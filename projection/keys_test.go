package projection_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestKeysPagesAsList: a keys-only page holds the keys a listing's page
// holds, with their version, purpose and expiry, under the same cursor
// and limit; its byte budget counts no value, so large values do not cut
// it short.
func TestKeysPagesAsList(t *testing.T) {
	t.Parallel()
	s := projection.New(testenv.MustPostgres(t))
	now := t0.Add(24 * time.Hour)
	const p = "tenant/t/project/keys/"
	big := `"` + strings.Repeat("x", 64<<10) + `"`
	var evs []contract.Event
	for i := range 10 {
		e := put(t, fmt.Sprintf("%sk%02d", p, i), int64(i+1), big)
		e.Semantics.Purpose = "config"
		evs = append(evs, e)
	}
	exp := now.Add(time.Hour)
	evs[3].ExpiresAt = &exp
	dead := now.Add(-time.Hour)
	evs[4].ExpiresAt = &dead
	evs = append(evs, event(t, contract.KindDelete, p+"k05", 7, ""), put(t, "tenant/t/project/keysx/a", 1, "1"))
	mustApply(t, s, "kv.changes", batchOf(0, evs...))
	ctx := context.Background()
	keys, truncated, err := s.Keys(ctx, p, projection.Page{Limit: 100, MaxBytes: 1 << 20, Now: now})
	if err != nil || truncated {
		t.Fatalf("Keys: %v truncated %v", err, truncated)
	}
	entries, _, err := s.List(ctx, p, projection.Page{Limit: 100, MaxBytes: noBudget, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(entries) || len(keys) != 8 {
		t.Fatalf("Keys answered %d keys, List %d entries; want 8 each", len(keys), len(entries))
	}
	for i, e := range entries {
		want := contract.KeyInfo{Key: e.Key, Version: e.Version, Purpose: "config", ExpiresAt: e.ExpiresAt}
		if k := keys[i]; k.Key != want.Key || k.Version != want.Version || k.Purpose != want.Purpose || !equalTime(k.ExpiresAt, want.ExpiresAt) {
			t.Errorf("key %d = %+v, want %+v", i, k, want)
		}
	}
	if keys[3].ExpiresAt == nil || !keys[3].ExpiresAt.Equal(exp) {
		t.Errorf("k03 expiry = %v, want %v", keys[3].ExpiresAt, exp)
	}
	page, truncated, err := s.Keys(ctx, p, projection.Page{After: p + "k01", Limit: 3, MaxBytes: 1 << 20, Now: now})
	if got := keyNames(page); err != nil || !truncated || !slices.Equal(got, []string{p + "k02", p + "k03", p + "k06"}) {
		t.Errorf("page after k01, limit 3 = %v truncated %v (%v)", got, truncated, err)
	}
	page, truncated, err = s.Keys(ctx, p, projection.Page{Limit: 100, MaxBytes: 1, Now: now})
	if err != nil || !truncated || len(page) != 1 {
		t.Errorf("a budget of 1 byte: %d keys, truncated %v (%v); want the first alone, truncated", len(page), truncated, err)
	}
}

// TestKeysReadsNoValue: the keys-only statement's plan outputs no value
// column at any node, so Postgres reads neither values nor their TOAST.
func TestKeysReadsNoValue(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	plan := projection.ExplainKeys(t, pool, "tenant/t/project/p/", t0)
	if !strings.Contains(plan, "Output:") {
		t.Fatalf("the plan shows no outputs:\n%s", plan)
	}
	for line := range strings.SplitSeq(plan, "\n") {
		if strings.Contains(line, "Output:") && strings.Contains(line, "value") {
			t.Errorf("a node outputs the value: %s\n%s", line, plan)
		}
	}
}

// TestProjects: each project with live, unexpired keys in a range, in key
// order, counted within the range; pages by limit; a project whose keys
// are all deleted or expired is left out.
func TestProjects(t *testing.T) {
	t.Parallel()
	s := projection.New(testenv.MustPostgres(t))
	now := t0.Add(24 * time.Hour)
	dead := now.Add(-time.Hour)
	expired := put(t, "tenant/b/project/gone/x", 1, "1")
	expired.ExpiresAt = &dead
	mustApply(t, s, "kv.changes", batchOf(0,
		put(t, "tenant/a/project/p/x", 1, "1"), put(t, "tenant/a/project/p/y/z", 1, "1"),
		put(t, "tenant/a/project/p-q/x", 1, "1"), put(t, "tenant/a/project/pq/x", 1, "1"),
		put(t, "tenant/a/project/del/x", 1, "1"), event(t, contract.KindDelete, "tenant/a/project/del/x", 2, ""),
		expired, put(t, "tenant/b/project/p/x", 1, "1"), put(t, "tenant/ab/project/p/x", 1, "1"),
	))
	ctx := context.Background()
	list := func(r projection.KeyRange, limit int) string {
		t.Helper()
		got, err := s.Projects(ctx, r, limit, now)
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for _, p := range got {
			parts = append(parts, fmt.Sprintf("%s=%d", p.Scope(), p.Keys))
		}
		return strings.Join(parts, " ")
	}
	all := projection.KeyRange{Lo: "tenant/", Hi: "tenant0"}
	for _, tc := range []struct {
		name  string
		r     projection.KeyRange
		limit int
		want  string
	}{
		{"All", all, 100, "tenant/a/project/p-q=1 tenant/a/project/p=2 tenant/a/project/pq=1 tenant/ab/project/p=1 tenant/b/project/p=1"},
		{"Limit", all, 2, "tenant/a/project/p-q=1 tenant/a/project/p=2"},
		{"Tenant", projection.KeyRange{Lo: "tenant/a/", Hi: "tenant/a0"}, 100, "tenant/a/project/p-q=1 tenant/a/project/p=2 tenant/a/project/pq=1"},
		{"BelowAProject", projection.KeyRange{Lo: "tenant/a/project/p/y/", Hi: "tenant/a/project/p/y0"}, 100, "tenant/a/project/p=1"},
		{"FromTheMiddle", projection.KeyRange{Lo: "tenant/a/project/p0", Hi: "tenant0"}, 100, "tenant/a/project/pq=1 tenant/ab/project/p=1 tenant/b/project/p=1"},
		{"Empty", projection.KeyRange{Lo: "tenant/c/", Hi: "tenant/c0"}, 100, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := list(tc.r, tc.limit); got != tc.want {
				t.Errorf("Projects = %q, want %q", got, tc.want)
			}
		})
	}
}

func keyNames(ks []contract.KeyInfo) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Key
	}
	return out
}

func equalTime(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}
