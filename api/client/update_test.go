package client_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/api/client"
	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/testenv/stack"
)

// TestUpdateConcurrent: 16 updaters of one key through the real stack,
// each adding 1 to a total and to its own field 5 times, lose no update:
// the total is 80 at version 80 (one version per update, none applied
// twice), and every updater's field is 5. The conflict schedule is
// shortened and jittered, as a client with many writers of one key
// would configure it.
func TestUpdateConcurrent(t *testing.T) {
	url := stack.MustStart(t)
	c := client.New(url, stack.DevToken, client.WithRetryPolicy(client.RetryPolicy{
		ConflictBase: 5 * time.Millisecond, ConflictCap: 5 * time.Second, ConflictJitter: true}))
	const (
		updaters = 16
		each     = 5
		k        = scope + "update/tally"
	)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		attempts int
		errs     []error
	)
	for w := range updaters {
		wg.Go(func() {
			mine := fmt.Sprintf("w%02d", w)
			for range each {
				res, err := c.Update(t.Context(), k, func(cur *events.Entry) (json.RawMessage, error) {
					v := map[string]int{}
					if cur != nil {
						if err := json.Unmarshal(cur.Value, &v); err != nil {
							return nil, err
						}
					}
					v["total"]++
					v[mine]++
					return json.Marshal(v)
				}, client.UpdateOptions{Semantics: events.Semantics{Purpose: "counter", Producer: "update-test"}})
				mu.Lock()
				attempts += res.Attempts
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d updates failed, the first: %v", len(errs), errs[0])
	}
	e, err := c.Get(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]int
	if err := json.Unmarshal(e.Value, &v); err != nil {
		t.Fatal(err)
	}
	if v["total"] != updaters*each || e.Version != updaters*each {
		t.Fatalf("total %d at version %d, want %d at version %d", v["total"], e.Version, updaters*each, updaters*each)
	}
	for w := range updaters {
		if n := v[fmt.Sprintf("w%02d", w)]; n != each {
			t.Errorf("updater %d counted %d, want %d", w, n, each)
		}
	}
	if e.Semantics.Purpose != "counter" {
		t.Errorf("semantics %+v, want the update's", e.Semantics)
	}
	t.Logf("%d updates took %d attempts (%d conflicts)", updaters*each, attempts, attempts-updaters*each)
}
