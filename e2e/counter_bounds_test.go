package e2e

import (
	"net/http"
	"sync"
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestBoundedDecrements: 16 clients each decrement a counter of 10 once
// with min 0 (the seed's rate limit) in one request each. Exactly 10
// succeed, the other 6 are refused with out_of_range on min carrying the
// counter at 0, the final value is 0, and the log holds exactly 10
// increment events after the seeding put: a refusal appends nothing.
func TestBoundedDecrements(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	const clients, quota = 16, 10
	path := base + "rate-limit/bounded"
	key := path[len("/v1/kv/"):]
	if r := s.do("PUT", path, devToken, `{"value":10,"expectedVersion":0}`); r.Status != http.StatusOK {
		t.Fatalf("seed: %d %s", r.Status, r.Body)
	}

	var (
		mu      sync.Mutex
		ok      int
		refused []contract.ErrorDetail
		wg      sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			r := s.do("POST", path+":increment", devToken, `{"by":-1,"min":0}`)
			mu.Lock()
			defer mu.Unlock()
			switch r.Status {
			case http.StatusOK:
				ok++
			case http.StatusConflict:
				refused = append(refused, r.errorBody(t))
			default:
				t.Errorf("decrement: %d %s", r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	if ok != quota || len(refused) != clients-quota {
		t.Fatalf("%d decrements succeeded and %d were refused, want %d and %d", ok, len(refused), quota, clients-quota)
	}
	for _, d := range refused {
		if d.Code != contract.EOutOfRange || d.Field != "min" || d.CurrentVersion == nil || *d.CurrentVersion != quota+1 || string(d.CurrentValue) != "0" {
			t.Errorf("refusal %+v, want out_of_range on min with the counter at 0, version %d", d, quota+1)
		}
	}

	var incs, others int
	for _, e := range s.readLog(t.Context()) {
		switch {
		case e.Key != key:
		case e.Op == contract.OpIncrement:
			incs++
		default:
			others++
		}
	}
	if incs != quota || others != 1 {
		t.Fatalf("log of %s: %d increment events and %d others, want %d and 1 (the seeding put)", key, incs, others, quota)
	}
	waitProjected(t, s)
	if e := s.do("GET", path, devToken, nil).entry(t); string(e.Value) != "0" || e.Version != quota+1 {
		t.Fatalf("final entry: value %s version %d, want 0 at version %d", e.Value, e.Version, quota+1)
	}
}
