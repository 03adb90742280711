package writer

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// randomValue is a JSON string of n random characters: compression (kgo
// snappy-compresses batches) cannot shrink it much.
func randomValue(n int) json.RawMessage {
	raw := make([]byte, n*3/4)
	for i := range raw {
		raw[i] = byte(rand.Uint32())
	}
	return json.RawMessage(`"` + base64.StdEncoding.EncodeToString(raw)[:n-2] + `"`)
}

// keysOn returns n keys of scope tenant/<tenant>/project/<x> for the first
// project x whose scope is on partition p of parts.
func keysOn(t *testing.T, tenant string, p, parts int32, n int) []contract.Key {
	t.Helper()
	for i := range 10_000 {
		scope := fmt.Sprintf("tenant/%s/project/p%d", tenant, i)
		if changelog.Partition(scope, parts) != p {
			continue
		}
		keys := make([]contract.Key, n)
		for j := range keys {
			keys[j] = mustKey(t, fmt.Sprintf("%s/k%d", scope, j))
		}
		return keys
	}
	t.Fatal("no scope on the partition")
	return nil
}

// bigTxn is a transaction of tenant A putting a random value of size
// bytes on each key.
func bigTxn(keys []contract.Key, size int) *decide.Txn {
	r := &decide.Txn{Header: decide.Header{Op: contract.OpTxn, Key: keys[0], Principal: "a"}}
	for _, k := range keys {
		r.Steps = append(r.Steps, decide.TxnStep{Write: &decide.KV{Header: decide.Header{Key: k, Op: contract.OpPut, Principal: "a"}, Value: randomValue(size)}})
	}
	return r
}

// outcomes counts answers by error code ("ok" for none).
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) add(err error) {
	code := "ok"
	if err != nil {
		code = contract.ErrorCode(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[code]++
}

func (o *outcomes) only(codes ...string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range codes {
		n += o.n[c]
	}
	for _, v := range o.n {
		n -= v
	}
	return n == 0
}

// TestOversizeWritesDoNotFailNeighbours (issue P1, finding 2): tenant A
// writes more than kv.changes' max.message.bytes (2 MiB, as
// changelog.Ensure creates it) in one go — transactions of 100 × 60 KiB
// and 100 × 29 KiB random values, one of 30 × 60 KiB overwriting 60 KiB
// values (over the limit with its before values only), and bursts of 64
// concurrent 60 KiB PUTs — while tenant B writes on the same partition
// and tenant C on the other. B and C see no failure; A gets only 200 or
// 413, never 503; no shared transaction fails.
func TestOversizeWritesDoNotFailNeighbours(t *testing.T) {
	t.Parallel()
	const parts = 2
	_, w := readyWriter(t, parts)
	a := keysOn(t, "a", 0, parts, 100)
	b := keysOn(t, "b", 0, parts, 4)
	c := keysOn(t, "c", 1, parts, 4)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// The overwriting transaction's before values are A's 60 KiB ones.
	for _, k := range a[:30] {
		if _, err := w.Do(ctx, &decide.KV{Header: decide.Header{Key: k, Op: contract.OpPut, Principal: "a"}, Value: randomValue(60 << 10)}); err != nil {
			t.Fatal(err)
		}
	}
	var aOut, bOut, cOut outcomes
	var stop atomic.Bool
	var neighbours sync.WaitGroup
	for _, n := range []struct {
		keys []contract.Key
		out  *outcomes
	}{{b, &bOut}, {c, &cOut}} {
		for _, k := range n.keys {
			neighbours.Go(func() {
				for i := 0; !stop.Load(); i++ {
					n.out.add(putKey(ctx, w, k, fmt.Sprint(i)))
				}
			})
		}
	}
	var attack sync.WaitGroup
	for burst := range 2 {
		for i := range 64 {
			attack.Go(func() {
				_, err := w.Do(ctx, &decide.KV{Header: decide.Header{Key: a[i], Op: contract.OpPut, Principal: "a", RequestID: fmt.Sprint("put-", burst, "-", i)}, Value: randomValue(60 << 10)})
				aOut.add(err)
			})
		}
		for _, txn := range []*decide.Txn{bigTxn(a, 60<<10), bigTxn(a, 29<<10), bigTxn(a[:30], 60<<10)} {
			attack.Go(func() {
				_, err := w.Do(ctx, txn)
				aOut.add(err)
				if limit := fmt.Sprint(w.limits.Budget(w.cfg.Topics.Changes)); err != nil && !strings.Contains(err.Error(), limit) {
					t.Errorf("413 %q does not name the limit, %s bytes", err, limit)
				}
			})
		}
		attack.Wait()
	}
	stop.Store(true)
	neighbours.Wait()

	t.Logf("tenant A: %v; tenant B (same partition): %v; tenant C (other partition): %v; deferred writes %v, failed transactions %v, ownership restarts %v",
		aOut.n, bOut.n, cOut.n, testutil.ToFloat64(w.metrics.deferred), testutil.ToFloat64(w.metrics.rounds.TxnFailures), testutil.ToFloat64(w.metrics.ownershipRestarts))
	for name, o := range map[string]*outcomes{"B": &bOut, "C": &cOut} {
		if !o.only("ok") || o.n["ok"] == 0 {
			t.Errorf("tenant %s: %v; want only successes", name, o.n)
		}
	}
	if !aOut.only("ok", contract.ETooLarge) || aOut.n[contract.ETooLarge] != 6 {
		t.Errorf("tenant A: %v; want 128 PUTs answered 200 and the 6 transactions 413", aOut.n)
	}
	if n := testutil.ToFloat64(w.metrics.rounds.TxnFailures); n != 0 {
		t.Errorf("%v shared transactions failed; want 0", n)
	}
}
