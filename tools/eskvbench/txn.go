package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// Figure 12: transactions (POST /v1/txn) of txnKeys puts, each
// conditioned on its key's version (a CAS of 10 keys at once, as
// figure 1 is of one).
const (
	txnKeys    = 10
	txnClients = 16
)

// txnState is one client's transaction: its keys and their versions.
type txnState struct {
	keys     []string
	versions []int64
	n        int
}

func (b *bench) newTxnState(project string) *txnState {
	st := &txnState{versions: make([]int64, txnKeys)}
	for i := range txnKeys {
		st.keys = append(st.keys, b.key(project, fmt.Sprintf("k%02d", i)))
	}
	return st
}

// txn applies one transaction of st: each key gets the next value,
// expecting the version the previous answer left.
func (b *bench) txn(ctx context.Context, c *client.Client, st *txnState) (int, error) {
	st.n++
	body := contract.TxnBody{Ops: make([]contract.TxnOp, txnKeys)}
	for i, k := range st.keys {
		body.Ops[i] = contract.TxnOp{Op: contract.OpPut, Key: k, Value: json.RawMessage(fmt.Sprint(st.n)),
			Condition: &contract.Condition{Version: &st.versions[i]}}
	}
	ans, err := c.Txn(ctx, body)
	if err != nil {
		if contract.ErrorCode(err) == contract.EConflict { // a timed-out attempt did commit: resync
			for i, k := range st.keys {
				if e, gerr := c.Get(ctx, k); gerr == nil {
					st.versions[i] = e.Version
				}
			}
		}
		return statusOf(err), err
	}
	for i, r := range ans.Results {
		st.versions[i] = r.Version
	}
	return http.StatusOK, nil
}

// transactions is figure 12: 12a one client's transactions of txnKeys
// keys (latency), 12b txnClients clients, each with its own keys in its
// own project, for -duration (throughput).
func (b *bench) transactions(ctx context.Context, rep *report) error {
	c := client.New(b.s.writerURL, b.s.token, client.WithHTTPClient(b.hc))
	n := max(1, b.c.n/4)
	b.logf("12 transactions of %d keys: 1 client x %d", txnKeys, n)
	st := b.newTxnState("txn-" + b.runID)
	lat, errs, elapsed := timed(ctx, n, true, func() (int, error) { return b.txn(ctx, c, st) })
	r := newResult("12a", fmt.Sprintf("txn of %d CAS puts, 1 client", txnKeys), summarize(lat), errs, elapsed)
	r.Note = fmt.Sprintf("POST /v1/txn of %d puts of one project, each conditioned on its version: one Kafka transaction, %d events", txnKeys, txnKeys)
	rep.add(r)
	if err := ctx.Err(); err != nil {
		return err
	}

	b.logf("12 transactions of %d keys: %d clients, each its own project, %s", txnKeys, txnClients, b.c.duration)
	metricsBefore := b.scrape(ctx, b.s.writerURL)
	calls := make([]func() (int, error), txnClients)
	for i := range calls {
		st := b.newTxnState(fmt.Sprintf("txn-%s-%02d", b.runID, i))
		calls[i] = func() (int, error) { return b.txn(ctx, c, st) }
	}
	lats, all, elapsed := loops(ctx, time.Now().Add(b.c.duration), calls)
	t := newResult("12b", fmt.Sprintf("txn of %d CAS puts, %d clients / %d projects", txnKeys, txnClients, txnClients), summarize(lats...), all, elapsed)
	t.Note = fmt.Sprintf("%.0f keys written/s in transactions", t.OpsPerSec*txnKeys)
	if bn := b.batchNote(metricsBefore, b.scrape(ctx, b.s.writerURL)); bn != "" {
		t.Note += "; " + bn
	}
	rep.add(t)
	return ctx.Err()
}
