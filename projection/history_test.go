package projection_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestHistoryPages: History pages a key's versions oldest first from a
// version on, bounded by the limit and by the byte budget (always at
// least one version), with next the first version of the next page; a
// delete has no value; other keys never show.
func TestHistoryPages(t *testing.T) {
	t.Parallel()
	s := projection.New(testenv.MustPostgres(t))
	const k = "tenant/t/project/p/doc"
	big := `"` + strings.Repeat("x", 1000) + `"`
	mustApply(t, s, "kv.changes", batchOf(0,
		put(t, k, 1, `{"a":1}`), put(t, k, 2, big), event(t, contract.KindDelete, k, 3, ""), put(t, k, 4, big), put(t, k, 5, `5`),
		put(t, k+"2", 1, `"other key"`)))
	page := func(from int64, limit, maxBytes int) string {
		t.Helper()
		vs, next, err := s.History(context.Background(), k, from, limit, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range vs {
			val := string(v.Value)
			if len(val) > 10 {
				val = "big"
			}
			out = append(out, fmt.Sprintf("%d:%s:%s", v.Version, v.Op, val))
		}
		return fmt.Sprintf("%s next=%d", strings.Join(out, " "), next)
	}
	for _, tc := range []struct {
		from            int64
		limit, maxBytes int
		want            string
	}{
		{1, 100, 1 << 20, `1:set:{"a":1} 2:set:big 3:delete: 4:set:big 5:set:5 next=0`},
		{1, 2, 1 << 20, `1:set:{"a":1} 2:set:big next=3`},
		{3, 2, 1 << 20, `3:delete: 4:set:big next=5`},
		{5, 2, 1 << 20, `5:set:5 next=0`},
		{6, 2, 1 << 20, ` next=0`},
		{1, 100, 2500, `1:set:{"a":1} 2:set:big 3:delete: next=4`}, // the budget ends the page before the second big value
		{2, 100, 1, `2:set:big next=3`},                            // a page holds at least one version
	} {
		if got := page(tc.from, tc.limit, tc.maxBytes); got != tc.want {
			t.Errorf("History(from %d, limit %d, %d bytes) = %s, want %s", tc.from, tc.limit, tc.maxBytes, got, tc.want)
		}
	}
}

// TestPruneHistory: PruneHistory removes what a retention no longer keeps
// and nothing else, through statements smaller than the work (2 keys, 3
// rows each), so it pages over keys and repeats a statement the row bound
// cut short; a retention that keeps everything removes nothing.
func TestPruneHistory(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	const p = "tenant/t/project/p/"
	var evs []contract.Event
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		n := map[string]int64{"a": 6, "b": 1, "c": 3, "d": 8, "e": 2}[k]
		for v := int64(1); v <= n; v++ {
			evs = append(evs, put(t, p+k, v, fmt.Sprint(v)))
		}
	}
	evs = append(evs, event(t, contract.KindDelete, p+"e", 3, "")) // e: put, put, delete
	mustApply(t, s, "kv.changes", batchOf(0, evs...))
	batch := projection.PruneBatch{Keys: 2, Rows: 3}
	left := func() string {
		var out []string
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			out = append(out, fmt.Sprintf("%s%v", k, historyVersions(t, pool, p+k)))
		}
		return strings.Join(out, " ")
	}
	ctx := context.Background()
	if n, err := s.PruneHistory(ctx, projection.Retention{}, t0.Add(1000*time.Hour), batch); err != nil || n != 0 {
		t.Fatalf("keep everything: %d, %v", n, err)
	}
	// Event ts is t0 + version seconds: age 3s at t0+7s removes versions 1
	// to 3 (ts before t0+4s), but never a key's newest.
	n, err := s.PruneHistory(ctx, projection.Retention{MaxAge: 3 * time.Second}, t0.Add(7*time.Second), batch)
	if want := "a[4 5 6] b[1] c[3] d[4 5 6 7 8] e[3]"; err != nil || left() != want || n != 3+0+2+3+2 {
		t.Fatalf("age 3s: removed %d (%v), left %s, want 10 and %s", n, err, left(), want)
	}
	n, err = s.PruneHistory(ctx, projection.Retention{MaxVersions: 2}, t0, batch)
	if want := "a[5 6] b[1] c[3] d[7 8] e[3]"; err != nil || left() != want || n != 1+3 {
		t.Fatalf("versions 2: removed %d (%v), left %s, want 4 and %s", n, err, left(), want)
	}
	n, err = s.PruneHistory(ctx, projection.Retention{MaxAge: time.Hour, MaxVersions: 1}, t0, batch)
	if want := "a[6] b[1] c[3] d[8] e[3]"; err != nil || left() != want || n != 2 {
		t.Fatalf("versions 1 (age not reached): removed %d (%v), left %s, want 2 and %s", n, err, left(), want)
	}
}
