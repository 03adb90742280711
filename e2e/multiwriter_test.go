package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
)

// TestManyWritersCASUnderKills: three writer processes share the
// partitions; clients send read-then-CAS increments to any writer (a
// writer forwards to the owner); meanwhile writers are killed with SIGKILL
// and restarted, and one is stopped gracefully and restarted. Afterwards:
// every acknowledged write is in the log, versions per key are contiguous,
// each increment's value is its predecessor's plus one (no lost update
// across ownership moves), and the projection is the fold of the log.
func TestManyWritersCASUnderKills(t *testing.T) {
	t.Parallel()
	ps := mustWriterProcs(t, 3)
	s, writers, urls := ps.stack, ps.writers, ps.urls

	// Forwarding: the same key written through every writer; two of them
	// do not own it and forward to the one that does.
	for i, u := range urls {
		testenv.WaitFor(t, 30*time.Second, "a write through writer "+fmt.Sprint(i), func() bool {
			req, _ := http.NewRequest("PUT", u+"/v1/kv/tenant/fwd/project/p/k", strings.NewReader(fmt.Sprintf(`{"value":%d}`, i)))
			req.Header.Set("Authorization", "Bearer "+devToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
	}
	for _, u := range urls {
		req, _ := http.NewRequest("GET", u+"/v1/kv/tenant/fwd/project/p/k", nil)
		req.Header.Set("Authorization", "Bearer "+devToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e contract.Entry
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&e) != nil || e.Version != 3 || string(e.Value) != "2" {
			t.Fatalf("read through %s: %d %+v; want version 3 value 2 from every writer", u, resp.StatusCode, e)
		}
		resp.Body.Close()
	}

	const keys = 8
	keyOf := func(i int) string { return fmt.Sprintf("tenant/t%d/project/p/counter", i) }
	stop := make(chan struct{})
	var (
		wg                   sync.WaitGroup
		mu                   sync.Mutex
		acks                 []ack
		ok, conflicts, other atomic.Int64
	)
	client := &http.Client{Timeout: 5 * time.Second}
	call := func(method, url, body string) (int, []byte) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+devToken)
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var b []byte
		b, _ = io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for c := range 12 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 11))
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := keyOf(rng.IntN(keys))
				base := urls[rng.IntN(len(urls))] + "/v1/kv/" + key
				status, body := call("GET", base, "")
				var cur struct {
					Value   int64 `json:"value"`
					Version int64 `json:"version"`
				}
				switch status {
				case 200:
					if json.Unmarshal(body, &cur) != nil {
						t.Errorf("get %s: %s", key, body)
						return
					}
				case 404:
				default:
					other.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				status, body = call("PUT", base, fmt.Sprintf(`{"value":%d,"expectedVersion":%d}`, cur.Value+1, cur.Version))
				switch status {
				case 200:
					var e contract.Entry
					if json.Unmarshal(body, &e) != nil {
						t.Errorf("put %s: %s", key, body)
						return
					}
					ok.Add(1)
					mu.Lock()
					acks = append(acks, ack{key, e.Version, string(e.Value)})
					mu.Unlock()
				case 409:
					conflicts.Add(1)
				default:
					other.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	progress := func(n int64) {
		t.Helper()
		before := ok.Load()
		testenv.WaitFor(t, 90*time.Second, fmt.Sprintf("%d more acknowledged increments", n), func() bool { return ok.Load() >= before+n })
	}
	progress(200)
	writers[0].Kill()
	progress(100)
	mustStart(t, writers[0])
	progress(200)
	writers[1].Stop(stopGrace)
	progress(100)
	mustStart(t, writers[1])
	progress(200)
	writers[2].Kill()
	mustStart(t, writers[2])
	progress(200)
	close(stop)
	wg.Wait()

	log := assertAcknowledgedInLog(t, s, acks)
	prev := map[string]int64{}
	for _, e := range log {
		if !strings.HasSuffix(e.Key, "/counter") {
			continue
		}
		var v int64
		if err := json.Unmarshal(e.After, &v); err != nil {
			t.Fatalf("%s@%d: value %s", e.Key, e.Version, e.After)
		}
		if v != prev[e.Key]+1 {
			t.Fatalf("%s@%d: value %d follows %d: an update was lost", e.Key, e.Version, v, prev[e.Key])
		}
		prev[e.Key] = v
	}
	t.Logf("%d increments acknowledged, %d conflicts, %d unavailable or failed answers; log of %d events", ok.Load(), conflicts.Load(), other.Load(), len(log))
}
