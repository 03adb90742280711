package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
)

// Transactions on the real stack: atomicity seen by readers while 32
// clients move amounts between accounts, and whole transactions in the
// log after the writer is killed with SIGKILL. (The contract's own
// cases, a failing condition, cross-project and replay, are in
// txn_test.go.)

// accounts are the 10 keys of one project the transfer tests move
// amounts between; their sum never changes.
const (
	accountPrefix = "tenant/bank/project/ledger/acct/"
	accounts      = 10
	opening       = 1000
)

func account(i int) string { return fmt.Sprintf("%s%02d", accountPrefix, i) }

// balances reads the accounts in one listing: their count and sum.
func (s *stack) balances(tb testing.TB) (n int, sum int64, ok bool) {
	tb.Helper()
	r := s.do("GET", "/v1/kv?prefix="+accountPrefix+"&limit=100", devToken, nil)
	if r.Status != http.StatusOK {
		tb.Errorf("listing: %d %s", r.Status, r.Body)
		return 0, 0, false
	}
	var l contract.ListAnswer
	if err := json.Unmarshal(r.Body, &l); err != nil {
		tb.Errorf("listing %s: %v", r.Body, err)
		return 0, 0, false
	}
	for _, e := range l.Items {
		var v int64
		if err := json.Unmarshal(e.Value, &v); err != nil {
			tb.Errorf("%s holds %s: %v", e.Key, e.Value, err)
			return 0, 0, false
		}
		sum += v
	}
	return len(l.Items), sum, true
}

// projectedBalances reads the accounts from the projection in one SQL
// statement (one snapshot of Postgres).
func (s *stack) projectedBalances(tb testing.TB, ctx context.Context) (n int, sum int64, ok bool) {
	tb.Helper()
	err := s.pg.Pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(value::bigint), 0)::bigint FROM kv_entries
		WHERE key >= $1 AND key < $2 AND live`, accountPrefix, accountPrefix[:len(accountPrefix)-1]+"0").Scan(&n, &sum)
	if err != nil {
		if ctx.Err() == nil {
			tb.Errorf("projected balances: %v", err)
		}
		return 0, 0, false
	}
	return n, sum, true
}

// TestTxnTransfersKeepTheSum: 32 clients move random amounts between 10
// accounts of one project, each transfer a transaction of two puts
// conditioned on the versions the client read. While they run, readers
// check that the 10 accounts sum to the same total in every listing (one
// GET /v1/kv?prefix=) and in every read of the projection (one SQL
// statement); so does the final state. The log holds each applied
// transfer whole (two events, one txnId), as many as were acknowledged,
// and each key's versions count the transfers that touched it.
func TestTxnTransfersKeepTheSum(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	const clients = 32
	transfersPerClient := 40
	if testing.Short() {
		transfersPerClient = 10
	}
	total := int64(accounts * opening)
	open := contract.TxnBody{}
	for i := range accounts {
		open.Ops = append(open.Ops, contract.TxnOp{Op: contract.OpPut, Key: account(i), Value: json.RawMessage(fmt.Sprint(opening)),
			Condition: &contract.Condition{Version: new(int64)}})
	}
	api := client.New(s.url, devToken, client.WithHTTPClient(httpClient))
	if _, err := api.Txn(t.Context(), open); err != nil {
		t.Fatalf("opening the accounts: %v", err)
	}
	waitProjected(t, s) // the SQL reader reads the projection

	// Readers: listings and the projection, until the writers are done.
	var listings, sqlReads, bad atomic.Int64
	readCtx, stopReads := context.WithCancel(t.Context())
	stopReaders := runClients(t, 3, func(c, _ int) {
		var (
			n   int
			sum int64
			ok  bool
		)
		if c == 0 {
			if n, sum, ok = s.projectedBalances(t, readCtx); !ok {
				return
			}
			sqlReads.Add(1)
		} else {
			if n, sum, ok = s.balances(t); !ok {
				return
			}
			listings.Add(1)
		}
		if n != accounts || sum != total {
			if bad.Add(1) <= 5 {
				t.Errorf("reader %d (%s) saw %d accounts summing to %d, want %d summing to %d",
					c, map[bool]string{true: "SQL", false: "listing"}[c == 0], n, sum, accounts, total)
			}
		}
	})

	var (
		applied, conflicts atomic.Int64
		touched            [accounts]atomic.Int64
		wg                 sync.WaitGroup
	)
	for c := range clients {
		rng := rand.New(rand.NewPCG(uint64(c), 42))
		wg.Go(func() {
			for range transfersPerClient {
				from, to := rng.IntN(accounts), rng.IntN(accounts-1)
				if to >= from {
					to++
				}
				a, b := s.do("GET", "/v1/kv/"+account(from), devToken, nil), s.do("GET", "/v1/kv/"+account(to), devToken, nil)
				if a.Status != http.StatusOK || b.Status != http.StatusOK {
					t.Errorf("reading accounts: %d %s / %d %s", a.Status, a.Body, b.Status, b.Body)
					return
				}
				ea, eb := a.entry(t), b.entry(t)
				var va, vb int64
				if json.Unmarshal(ea.Value, &va) != nil || json.Unmarshal(eb.Value, &vb) != nil {
					t.Errorf("accounts hold %s and %s", ea.Value, eb.Value)
					return
				}
				amount := min(va, 1+rng.Int64N(50))
				ans, err := api.Txn(t.Context(), contract.TxnBody{Ops: []contract.TxnOp{
					{Op: contract.OpPut, Key: account(from), Value: json.RawMessage(fmt.Sprint(va - amount)), Condition: &contract.Condition{Version: &ea.Version}},
					{Op: contract.OpPut, Key: account(to), Value: json.RawMessage(fmt.Sprint(vb + amount)), Condition: &contract.Condition{Version: &eb.Version}},
				}})
				var e *contract.Error
				switch {
				case err == nil:
					if len(ans.Results) != 2 || ans.Results[0].Version != ea.Version+1 || ans.Results[1].Version != eb.Version+1 || ans.TxnID == "" {
						t.Errorf("transfer answered %+v after versions %d and %d", ans, ea.Version, eb.Version)
					}
					applied.Add(1)
					touched[from].Add(1)
					touched[to].Add(1)
				case errors.As(err, &e) && e.Code == contract.EConflict && e.FailedOp != nil:
					// Another transfer changed an account since the read.
					if *e.FailedOp != 0 && *e.FailedOp != 1 {
						t.Errorf("conflict names op %d of 2", *e.FailedOp)
					}
					conflicts.Add(1)
				default:
					t.Errorf("transfer: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	stopReads()
	stopReaders()
	if t.Failed() {
		return
	}
	if applied.Load() == 0 || listings.Load() == 0 || sqlReads.Load() == 0 {
		t.Fatalf("%d transfers applied, %d listings and %d SQL reads: nothing was checked", applied.Load(), listings.Load(), sqlReads.Load())
	}

	// The final state, once projected: listing, projection and log agree.
	waitProjected(t, s)
	if n, sum, _ := s.balances(t); n != accounts || sum != total {
		t.Fatalf("finally %d accounts sum to %d, want %d summing to %d", n, sum, accounts, total)
	}
	if n, sum, _ := s.projectedBalances(t, t.Context()); n != accounts || sum != total {
		t.Fatalf("finally the projection has %d accounts summing to %d, want %d summing to %d", n, sum, accounts, total)
	}
	l, err := logcheck.Read(t.Context(), s.broker.Addrs, s.broker.Topics)
	if err != nil {
		t.Fatal(err)
	}
	f := logcheck.Txns(l.Events)
	if v := f.Violations(); len(v) > 0 {
		t.Fatalf("%d transactions are not whole in the log:\n%s", len(v), strings.Join(v[:min(len(v), 20)], "\n"))
	}
	if f.Sizes[2] != int(applied.Load()) || f.Sizes[accounts] != 1 || f.Txns != int(applied.Load())+1 {
		t.Fatalf("the log holds transactions of sizes %v; %d transfers of 2 were acknowledged, and the opening of %d", f.Sizes, applied.Load(), accounts)
	}
	for i := range accounts {
		e := s.do("GET", "/v1/kv/"+account(i), devToken, nil).entry(t)
		if want := 1 + touched[i].Load(); e.Version != want {
			t.Errorf("%s is at version %d; the opening and %d transfers touched it", account(i), e.Version, want-1)
		}
	}
	assertLogInvariants(t, s, nil)
	t.Logf("%d transfers applied, %d refused by a condition; the sum held in %d listings and %d SQL reads",
		applied.Load(), conflicts.Load(), listings.Load(), sqlReads.Load())
}

// TestTxnWriterKill9: 16 clients apply transactions of 2 to 6
// increments summing to 0 on keys of 4 projects while the writer is
// killed with SIGKILL three times. Every transaction is in the log
// entirely or not at all (its events grouped by txnId number its
// txnSize, adjacent in one partition); each acknowledged one is there;
// every project's counters still sum to 0 in the projection.
func TestTxnWriterKill9(t *testing.T) {
	t.Parallel()
	s := mustProcStack(t)
	const projects, keysPerProject = 4, 12
	var (
		mu       sync.Mutex
		acked    = map[string]int{} // txnId: its size
		failures atomic.Int64
		okCount  atomic.Int64
	)
	rngs := make([]*rand.Rand, 16)
	for c := range rngs {
		rngs[c] = rand.New(rand.NewPCG(uint64(c), 9))
	}
	// Without a requestId the client does not retry: a failed call is
	// counted, its transaction in the log or not.
	api := client.New(s.url, devToken, client.WithHTTPClient(shortClient))
	stop := runClients(t, len(rngs), func(i, _ int) {
		rng := rngs[i]
		project := rng.IntN(projects)
		size := 2 + rng.IntN(5)
		b := contract.TxnBody{}
		var rest int64
		for i, k := range rng.Perm(keysPerProject)[:size] {
			by := 1 + rng.Int64N(100)
			if i == size-1 {
				by = -rest
			}
			rest += by
			b.Ops = append(b.Ops, contract.TxnOp{Op: contract.OpIncrement, Key: fmt.Sprintf("tenant/t%d/project/p/n%02d", project, k), By: &by, Create: true})
		}
		ans, err := api.Txn(context.Background(), b)
		if err != nil {
			failures.Add(1)
			time.Sleep(20 * time.Millisecond) // back off while the writer restarts
			return
		}
		okCount.Add(1)
		mu.Lock()
		acked[ans.TxnID] = size
		mu.Unlock()
	})
	s.killWriterThrice(t, &okCount, 200, "acknowledged transactions")
	stop()

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	l, err := logcheck.Read(ctx, s.broker.Addrs, s.broker.Topics)
	if err != nil {
		t.Fatal(err)
	}
	f := logcheck.Txns(l.Events)
	if v := f.Violations(); len(v) > 0 {
		t.Fatalf("%d transactions are not whole in the log:\n%s", len(v), strings.Join(v[:min(len(v), 20)], "\n"))
	}
	inLog := map[string]int{}
	for _, e := range l.Events {
		inLog[e.Event.TxnID]++
	}
	for id, size := range acked {
		if inLog[id] != size {
			t.Fatalf("acknowledged transaction %s of %d increments has %d events in the log", id, size, inLog[id])
		}
	}
	assertProjectionIsFoldOfLog(t, s.stack)
	assertLogInvariants(t, s.stack, nil)
	for p := range projects {
		var sum int64
		if err := s.pg.Pool.QueryRow(ctx, `SELECT coalesce(sum(value::bigint), 0)::bigint FROM kv_entries WHERE scope = $1 AND live`,
			fmt.Sprintf("tenant/t%d/project/p", p)).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		if sum != 0 {
			t.Errorf("project %d's counters sum to %d, not 0: a transaction was applied in part", p, sum)
		}
	}
	t.Logf("%d acknowledged transactions whole among %d in a log of %d transactional events (sizes %v); %d requests failed during 3 writer kills",
		len(acked), f.Txns, f.Events, f.Sizes, failures.Load())
}
