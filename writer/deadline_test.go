package writer

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestQueuedWriteNotDecidedAfterItsCallerGaveUp: a write still queued
// when its caller's deadline passes is answered partition_unavailable
// (not outcome_unknown: it is withdrawn), and its partition, reaching it
// later, writes nothing of it. It used to be answered outcome_unknown
// and committed seconds later.
func TestQueuedWriteNotDecidedAfterItsCallerGaveUp(t *testing.T) {
	t.Parallel()
	b := testenv.MustBroker(t, 1)
	pg := testenv.MustPostgresDB(t)
	pool := pg.Pool
	w := runWriter(t, b, projection.New(pool), Config{})
	testenv.WaitFor(t, 30*time.Second, "the writer ready", func() bool { return w.Ready() && len(w.owned()) == 1 })
	key := func(s string) contract.Key {
		k, err := contract.ParseKey("tenant/t/project/p/" + s)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}

	// The partition's first batch reads the projection, which a
	// transaction holds locked: the partition is busy, and what comes
	// next queues behind it.
	release := pg.Lock(t, "kv_entries")
	first := make(chan error, 1)
	go func() { first <- putKey(t.Context(), w, key("first"), "a") }()
	testenv.WaitFor(t, 10*time.Second, "the first write's read waiting for the lock", func() bool {
		var n int
		if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_locks WHERE NOT granted").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := putKey(ctx, w, key("gave-up"), "b"); contract.ErrorCode(err) != contract.EUnavailable {
		t.Fatalf("a write queued past its deadline: %v; want %s", err, contract.EUnavailable)
	}
	release()
	if err := <-first; err != nil {
		t.Fatalf("the first write: %v", err)
	}
	// Queued after the abandoned one: once it is answered, the
	// partition has been through the abandoned one.
	if err := putKey(t.Context(), w, key("after"), "c"); err != nil {
		t.Fatalf("a write after: %v", err)
	}

	var keys []string
	for _, r := range committedRecords(t, w, 0) {
		e, err := changelog.Event(r)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, e.Key)
	}
	want := []string{key("first").String(), key("after").String()}
	if !slices.Equal(keys, want) {
		t.Fatalf("committed events of %q; want %q (nothing of the write whose caller gave up)", keys, want)
	}
	if s, err := w.State(t.Context(), key("gave-up")); err != nil || s.Version != 0 {
		t.Fatalf("the abandoned key's state: %+v, %v; want none", s, err)
	}
}

// TestCallClaim: a call is decided or withdrawn, never both, whichever
// of its partition (take) and its caller (withdraw) comes first.
func TestCallClaim(t *testing.T) {
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	for _, tc := range []struct {
		name           string
		ctx            context.Context
		steps          string // t: take, w: withdraw, in order
		took, withdrew []bool
	}{
		{"OKTakenThenNotWithdrawn", t.Context(), "tw", []bool{true}, []bool{false}},
		{"OKWithdrawnThenNotTaken", t.Context(), "wt", []bool{false}, []bool{true}},
		{"OKTakenAgain", t.Context(), "ttw", []bool{true, true}, []bool{false}},
		{"OKNoCallerTaken", nil, "tt", []bool{true, true}, nil},
		{"ErrEndedContextWithdrawsAtTake", ended, "tw", []bool{false}, []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &call{ctx: tc.ctx}
			var took, withdrew []bool
			for _, s := range tc.steps {
				if s == 't' {
					took = append(took, c.take())
				} else {
					withdrew = append(withdrew, c.withdraw())
				}
			}
			if !slices.Equal(took, tc.took) || !slices.Equal(withdrew, tc.withdrew) {
				t.Fatalf("take %v, withdraw %v; want %v, %v", took, withdrew, tc.took, tc.withdrew)
			}
		})
	}
}
