package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// TestConcurrentCASIncrements: 32 clients run read-then-CAS-increment loops
// on the same 4 keys. Each key's final value equals its number of 200
// answers and its version; the log holds versions 1..N per key exactly
// once; every 409 carried the version that was current.
func TestConcurrentCASIncrements(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	const clients, keys = 32, 4
	opsPerClient := 100
	if testing.Short() {
		opsPerClient = 20
	}
	keyPath := func(i int) string { return fmt.Sprintf("%scounter/%d", base, i) }
	for i := range keys {
		if r := s.do("PUT", keyPath(i), devToken, `{"value":0,"expectedVersion":0}`); r.Status != 200 {
			t.Fatalf("seed: %d %s", r.Status, r.Body)
		}
	}

	type conflict struct{ expected, current int64 }
	var (
		mu        sync.Mutex
		successes = make([]int64, keys)
		conflicts = make([][]conflict, keys)
		wg        sync.WaitGroup
	)
	for c := range clients {
		wg.Go(func() {
			for i := range opsPerClient {
				k := (c + i) % keys
				r := s.do("GET", keyPath(k), devToken, nil)
				if r.Status != 200 {
					t.Errorf("get: %d %s", r.Status, r.Body)
					return
				}
				e := r.entry(t)
				var n int64
				if err := json.Unmarshal(e.Value, &n); err != nil {
					t.Errorf("value %s: %v", e.Value, err)
					return
				}
				r = s.do("PUT", keyPath(k), devToken, map[string]any{"value": n + 1, "expectedVersion": e.Version})
				mu.Lock()
				switch r.Status {
				case http.StatusOK:
					successes[k]++
				case http.StatusConflict:
					d := r.errorBody(t)
					conflicts[k] = append(conflicts[k], conflict{e.Version, *d.CurrentVersion})
				default:
					t.Errorf("cas: %d %s", r.Status, r.Body)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	log := s.readLog(t.Context())
	versions := map[string][]int64{}
	for _, e := range log {
		versions[e.Key] = append(versions[e.Key], e.Version)
	}
	waitProjected(t, s)
	var total int64
	for k := range keys {
		key := keyPath(k)[len("/v1/kv/"):]
		n := successes[k]
		total += n
		e := s.do("GET", keyPath(k), devToken, nil).entry(t)
		if string(e.Value) != fmt.Sprint(n) || e.Version != n+1 {
			t.Errorf("%s: value %s version %d after %d successful increments", key, e.Value, e.Version, n)
		}
		st, err := s.store.State(t.Context(), key)
		if err != nil || st.Version != n+1 {
			t.Errorf("%s: projected version %d (%v), want %d", key, st.Version, err, n+1)
		}
		vs := versions[key]
		if int64(len(vs)) != n+1 {
			t.Errorf("%s: %d events in the log, want %d", key, len(vs), n+1)
		}
		for i, v := range vs {
			if v != int64(i+1) {
				t.Fatalf("%s: versions in the log are not 1..N: %v", key, vs)
			}
		}
		// A 409 must name a version newer than the one the client read:
		// the true current version at decision time.
		for _, c := range conflicts[k] {
			if c.current <= c.expected || c.current > n+1 {
				t.Errorf("%s: conflict for expected %d reported current %d (final %d)", key, c.expected, c.current, n+1)
			}
		}
	}
	t.Logf("%d increments succeeded, %d conflicts", total, clients*opsPerClient-int(total))
	if total == 0 {
		t.Fatal("no increment succeeded")
	}
}
