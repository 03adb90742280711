package clienttest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestUpdateConcurrent: 16 updaters of one key through the real stack,
// each adding 1 to a total and to its own field 5 times, lose no update:
// the total is 80 at version 80 (one version per update, none applied
// twice), and every updater's field is 5. The conflict schedule is
// shortened and jittered, as a client with many writers of one key
// would configure it; its cap (20 s: 13 attempts, the last waits 10 and
// 20 s) leaves a loser room once the others are done: with 5 s (12
// attempts) one updater of 16 lost all of them once under make test on
// a slow VM (stop 59, VM-G), a liveness bound this test does not claim.
func TestUpdateConcurrent(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.DevToken, client.WithRetryPolicy(client.RetryPolicy{
		ConflictBase: 5 * time.Millisecond, ConflictCap: 20 * time.Second, ConflictJitter: true}))
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
				res, err := c.Update(t.Context(), k, func(cur *contract.Entry) (json.RawMessage, error) {
					v := map[string]int{}
					if cur != nil {
						if err := json.Unmarshal(cur.Value, &v); err != nil {
							return nil, err
						}
					}
					v["total"]++
					v[mine]++
					return json.Marshal(v)
				}, client.UpdateOptions{Semantics: contract.Semantics{Purpose: "counter", Producer: "update-test"}})
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

	t.Run("KeepsExpiryAndSemantics", func(t *testing.T) {
		k := scope + "update/leased"
		put, err := c.Put(t.Context(), client.PutRequest{Key: k, Value: json.RawMessage(`"a"`), TTL: time.Hour,
			Semantics: contract.Semantics{Purpose: "cursor", Producer: "harvester"}, SpecRef: "adr-9"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Update(t.Context(), k, func(cur *contract.Entry) (json.RawMessage, error) {
			return json.RawMessage(`"b"`), nil
		}, client.UpdateOptions{})
		e := res.Entry
		if err != nil || e.Version != 2 || string(e.Value) != `"b"` || e.ExpiresAt == nil || !e.ExpiresAt.Equal(*put.Entry.ExpiresAt) ||
			e.Semantics.Purpose != "cursor" || e.Semantics.Producer != "harvester" || e.SpecRef != "adr-9" {
			t.Fatalf("update answered %+v, %v; want value \"b\" with the expiry, semantics and specRef of %+v", e, err, put.Entry)
		}
		res, err = c.Update(t.Context(), k, func(cur *contract.Entry) (json.RawMessage, error) {
			return json.RawMessage(`"c"`), nil
		}, client.UpdateOptions{TTL: 2 * time.Hour})
		if err != nil || res.Entry.ExpiresAt == nil || !res.Entry.ExpiresAt.After(put.Entry.ExpiresAt.Add(30*time.Minute)) {
			t.Fatalf("an update with a TTL sets a new expiry: %+v, %v", res.Entry, err)
		}
	})
}
