package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/tools/linz"
)

// The transaction workload: -txn-clients clients move amounts between
// the accounts of a few projects of their own, each transfer one
// POST /v1/txn of two puts conditioned on the versions the client read
// (a missing account is 0 at version 0), and list the accounts now and
// then. The accounts start at 0, so they sum to 0 in every project at
// every moment if transactions are atomic: in every listing answered
// 200, in the log's final state and in the projection's. The
// linearizability model (tools/linz) does not cover transactions, and
// has range deletes of registers only (linz.DeleteRange), never of
// these accounts; these sums and the log's whole transactions
// (logcheck.Txns) check them.
//
// Now and then a client clears a project's accounts with one range
// delete (POST /v1/kv:deleteRange): absent accounts are 0, so an atomic
// clear keeps the sum 0, and a listing, the log or the projection that
// saw part of one would not (the range delete is one transaction of its
// delete events, checked whole like a transfer's).
const (
	txnProjects = 2 // projects of the transaction workload
	txnAccounts = 4 // accounts in each
)

// txnScopes are the projects of the transaction workload, apart from
// the registers' (tenant/chaos/project/p<i>) so that no other check sees
// their keys.
func txnScopes() []string {
	s := make([]string, txnProjects)
	for i := range s {
		s[i] = fmt.Sprintf("tenant/chaos/project/txn%d", i)
	}
	return s
}

func accountKey(scope string, i int) string { return fmt.Sprintf("%s/acct/%d", scope, i) }

// transfers runs the transaction workload and records what it was
// answered.
type transfers struct {
	c      *clients // the HTTP side: writers, token, timeout
	scopes []string

	mu       sync.Mutex
	outcomes map[string]int // applied, conflict, failed, unknown
	acked    map[string]int // txnId of an applied transfer: its events (2)
	listings int            // listings of the accounts answered 200
	badSums  []string       // listings whose accounts did not sum to 0
}

func newTransfers(c *clients) *transfers {
	return &transfers{c: c, scopes: txnScopes(), outcomes: map[string]int{}, acked: map[string]int{}}
}

// run starts n clients and returns once stop is closed and each finished
// its current operation.
func (t *transfers) run(n int, seed uint64, stop <-chan struct{}) {
	clientLoops(n, seed, 1000, stop, t.step)
}

// step lists the accounts of a random project (1 in 5) or moves a random
// amount between two of them, each call through a random writer; it
// reports whether the client should back off (a call failed or its
// outcome is unknown).
func (t *transfers) step(id, seq int, rng *rand.Rand) bool {
	scope := t.scopes[rng.IntN(len(t.scopes))]
	switch rng.IntN(40) {
	case 0, 1, 2, 3, 4, 5, 6, 7:
		return !t.list(rng.IntN(len(t.c.urls)), scope)
	case 8:
		outcome := t.clear(rng.IntN(len(t.c.urls)), scope)
		return outcome == "failed" || outcome == "unknown"
	}
	from, to := rng.IntN(txnAccounts), rng.IntN(txnAccounts-1)
	if to >= from {
		to++
	}
	a, okA := t.read(rng.IntN(len(t.c.urls)), accountKey(scope, from))
	b, okB := t.read(rng.IntN(len(t.c.urls)), accountKey(scope, to))
	if !okA || !okB {
		return true
	}
	amount := 1 + rng.Int64N(100)
	body := contract.TxnBody{RequestID: fmt.Sprintf("chaos-txn-c%d-%d", id, seq), Ops: []contract.TxnOp{
		{Op: contract.OpPut, Key: a.Key, Value: mustJSON(a.value - amount), Condition: &contract.Condition{Version: &a.Version}},
		{Op: contract.OpPut, Key: b.Key, Value: mustJSON(b.value + amount), Condition: &contract.Condition{Version: &b.Version}},
	}}
	outcome := t.transfer(rng.IntN(len(t.c.urls)), body)
	return outcome == "failed" || outcome == "unknown"
}

// account is an account as read: absent is 0 at version 0.
type account struct {
	Key     string
	Version int64
	value   int64
}

func (t *transfers) read(w int, key string) (account, bool) {
	a := t.c.do(http.MethodGet, t.c.urls[w]+"/v1/kv/"+key, nil)
	switch {
	case a.err == nil && a.status == http.StatusOK:
		var e contract.Entry
		var v int64
		if json.Unmarshal(a.body, &e) != nil || json.Unmarshal(e.Value, &v) != nil {
			return account{}, false
		}
		return account{Key: key, Version: e.Version, value: v}, true
	case a.err == nil && a.status == http.StatusNotFound && errorCode(a.body) == contract.ENotFound:
		return account{Key: key}, true
	}
	return account{}, false
}

// transfer posts one transfer and records its outcome: applied (200),
// conflict (409: a condition failed, nothing applied), failed (refused
// before it was queued) or unknown.
func (t *transfers) transfer(w int, b contract.TxnBody) string {
	body, _ := json.Marshal(b)
	a := t.c.do(http.MethodPost, t.c.urls[w]+"/v1/txn", body)
	outcome := "unknown"
	var ans contract.TxnAnswer
	switch {
	case a.err == nil && a.status == http.StatusOK && json.Unmarshal(a.body, &ans) == nil && ans.TxnID != "":
		outcome = "applied"
	case a.err == nil && a.status == http.StatusConflict && errorCode(a.body) == contract.EConflict:
		outcome = "conflict"
	default:
		if o, _ := classifyWrite(a, ""); o.Outcome == linz.Failed {
			outcome = "failed"
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outcomes[outcome]++
	if outcome == "applied" {
		t.acked[ans.TxnID] = len(b.Ops)
	}
	return outcome
}

// clear deletes the accounts of scope with one range delete and records
// its outcome: cleared (200: the txnId of its events, when it deleted
// any, is acknowledged with their count), failed or unknown.
func (t *transfers) clear(w int, scope string) string {
	body, _ := json.Marshal(contract.DeleteRangeBody{Prefix: scope + "/acct/"})
	a := t.c.do(http.MethodPost, t.c.urls[w]+"/v1/kv:deleteRange", body)
	outcome := "unknown"
	var ans contract.PrefixAnswer
	switch {
	case a.err == nil && a.status == http.StatusOK && json.Unmarshal(a.body, &ans) == nil:
		outcome = "cleared"
	default:
		if o, _ := classifyWrite(a, ""); o.Outcome == linz.Failed {
			outcome = "failed"
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.outcomes[outcome]++
	if outcome == "cleared" && ans.TxnID != "" {
		t.acked[ans.TxnID] = ans.Count
	}
	return outcome
}

// list lists the accounts of scope and records whether they sum to 0;
// it reports whether the listing was answered.
func (t *transfers) list(w int, scope string) bool {
	prefix := scope + "/acct/"
	a := t.c.do(http.MethodGet, t.c.urls[w]+"/v1/kv?limit=1000&prefix="+prefix, nil)
	var page contract.ListAnswer
	if a.err != nil || a.status != http.StatusOK || json.Unmarshal(a.body, &page) != nil {
		return false
	}
	var sum int64
	for _, e := range page.Items {
		var v int64
		if json.Unmarshal(e.Value, &v) != nil {
			sum = 1 << 62 // not a number: reported below
		}
		sum += v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.listings++
	if sum != 0 {
		t.badSums = append(t.badSums, fmt.Sprintf("listing of %s through writer %d summed to %d: %s", prefix, w, sum, strings.TrimSpace(string(a.body))))
	}
	return true
}

// txnFindings are the transaction workload's results and checks.
type txnFindings struct {
	outcomes map[string]int
	listings int
	badSums  []string
	log      logcheck.TxnFindings
	// missing: an applied transfer (or range delete) whose events are
	// not all in the log.
	// logSums and projSums: a project whose accounts do not sum to 0 in
	// the log's last events, or in kv_entries.
	missing, logSums, projSums []string
}

func (f *txnFindings) violations() []string {
	return slices.Concat(f.badSums, f.log.Violations(), f.missing, f.logSums, f.projSums)
}

// check checks the transaction workload against the log and, when
// projected is set (the projection holds the whole log), the
// projection.
func (t *transfers) check(ctx context.Context, evs []logcheck.Event, db *pgxpool.Pool, projected bool) (txnFindings, error) {
	t.mu.Lock()
	f := txnFindings{outcomes: t.outcomes, listings: t.listings, badSums: slices.Clone(t.badSums)}
	acked := t.acked
	t.mu.Unlock()
	f.log = logcheck.Txns(evs)
	inLog := map[string]int{}
	last := map[string]contract.Event{}
	for _, le := range evs {
		if le.Event.TxnID != "" {
			inLog[le.Event.TxnID]++
		}
		if slices.Contains(t.scopes, contract.ScopeOf(le.Event.Key)) && le.Event.Version > last[le.Event.Key].Version {
			last[le.Event.Key] = le.Event
		}
	}
	for id, n := range acked {
		if inLog[id] != n {
			f.missing = append(f.missing, fmt.Sprintf("applied transfer or range delete %s has %d of its %d events in the log", id, inLog[id], n))
		}
	}
	sums := map[string]int64{}
	for k, e := range last {
		var v int64
		if e.Live() && json.Unmarshal(e.After, &v) != nil {
			return f, fmt.Errorf("%s holds %s in the log", k, e.After)
		}
		sums[contract.ScopeOf(k)] += v
	}
	for _, s := range t.scopes {
		if sums[s] != 0 {
			f.logSums = append(f.logSums, fmt.Sprintf("the accounts of %s sum to %d in the log", s, sums[s]))
		}
		if !projected {
			continue
		}
		var sum int64
		if err := db.QueryRow(ctx, `SELECT coalesce(sum(value::bigint), 0)::bigint FROM kv_entries WHERE scope = $1 AND live`, s).Scan(&sum); err != nil {
			return f, fmt.Errorf("sum the accounts of %s: %w", s, err)
		}
		if sum != 0 {
			f.projSums = append(f.projSums, fmt.Sprintf("the accounts of %s sum to %d in kv_entries", s, sum))
		}
	}
	return f, nil
}

// print prints the transaction workload's line and its violations.
func (f *txnFindings) print(w io.Writer) {
	n, by := countBy(f.outcomes)
	v := f.violations()
	fmt.Fprintf(w, "transactions: %d violations (%d transfers: %s; %d listings of the accounts, %d not summing to 0; %d transactions in the log (sizes %v), %d not whole; %d applied not whole in the log; sums in the log and the projection: %d and %d projects off)\n",
		len(v), n, by, f.listings, len(f.badSums), f.log.Txns, f.log.Sizes, len(f.log.Violations()), len(f.missing), len(f.logSums), len(f.projSums))
	printFirst(w, v)
}
