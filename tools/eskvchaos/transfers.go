package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/tools/linz"
)

// The transfer workload: transactions (POST /v1/txn) that move 1 from one
// of transferKeys counters of one project to another, through random
// writers, while the faults run; one in four also checks a key that never
// exists, so it is rejected. A transaction applies both increments or
// neither, whatever the faults: in the log every transaction is whole
// (logcheck.Check's TxnBreaks), every acknowledged one is there
// (logcheck.LostTxns), no rejected one left an event, and the counters
// sum to 0.

// transferScope is the project of the transfer counters: one partition.
const transferScope = "tenant/chaos/project/transfers"

// transferKeys is how many counters the transfers move amounts between.
const transferKeys = 4

func transferKey(i int) string { return fmt.Sprintf("%s/acct/%d", transferScope, i) }

// transfer is one transaction of the workload and its outcome.
type transfer struct {
	RequestID string `json:"requestId"`
	Outcome   string `json:"outcome"` // ok, rejected, failed (no effect) or unknown
	TxnID     string `json:"txnId,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// transferStep sends one transfer through a random writer and records it.
func (c *clients) transferStep(id int, rng *rand.Rand, seq int) {
	from := rng.IntN(transferKeys)
	to := (from + 1 + rng.IntN(transferKeys-1)) % transferKeys
	minus, plus := int64(-1), int64(1)
	b := events.TxnBody{RequestID: fmt.Sprintf("chaos-t%d-%d", id, seq), Ops: []events.TxnOp{
		{Op: events.OpIncrement, Key: transferKey(from), By: &minus, Create: true},
		{Op: events.OpIncrement, Key: transferKey(to), By: &plus, Create: true},
	}}
	if rng.IntN(4) == 0 {
		yes := true
		b.Ops = append(b.Ops, events.TxnOp{Op: events.OpCheck, Key: transferScope + "/never", Condition: &events.Condition{Exists: &yes}})
	}
	body, _ := json.Marshal(b)
	t := classifyTransfer(c.do(http.MethodPost, c.urls[rng.IntN(len(c.urls))]+"/v1/txn", body))
	t.RequestID = b.RequestID
	c.mu.Lock()
	c.transfers = append(c.transfers, t)
	c.mu.Unlock()
}

// classifyTransfer turns the answer to a transfer into its outcome: 200
// is ok (with its txnId), a 409 naming the failing check (op 2) is
// rejected, and the rest is classified as a CAS write's answer is
// (classifyWrite): failed when the writer's code guarantees it had no
// effect, else unknown.
func classifyTransfer(a answer) transfer {
	switch {
	case a.err == nil && a.status == http.StatusOK:
		var ans events.TxnAnswer
		if err := json.Unmarshal(a.body, &ans); err != nil || ans.TxnID == "" || len(ans.Results) < 2 {
			return transfer{Outcome: "unknown", Detail: "undecodable answer: " + string(a.body)}
		}
		return transfer{Outcome: "ok", TxnID: ans.TxnID}
	case a.err == nil && a.status == http.StatusConflict:
		var b events.ErrorBody
		if json.Unmarshal(a.body, &b) == nil && b.Error.Code == events.EConflict && b.Error.FailedOp != nil && *b.Error.FailedOp == 2 {
			return transfer{Outcome: "rejected"}
		}
	}
	o, detail := classifyWrite(a, "")
	if o.Outcome == linz.Failed {
		return transfer{Outcome: "failed", Detail: detail}
	}
	return transfer{Outcome: "unknown", Detail: detail}
}

// transferFindings is what the log says of the transfers.
type transferFindings struct {
	// Lost: acknowledged transfers not whole in the log. Rejected: events
	// of rejected transfers (by requestId). Sum: the counters' sum in the
	// log, which must be 0.
	Lost, Rejected []string
	Sum            int64
	Counters       int
}

// checkTransfers checks the recorded transfers against the log.
func checkTransfers(ts []transfer, evs []logcheck.Event) transferFindings {
	var f transferFindings
	acked := map[string]int{}
	rejected := map[string]bool{}
	for _, t := range ts {
		switch t.Outcome {
		case "ok":
			acked[t.TxnID] = 2
		case "rejected":
			rejected[t.RequestID] = true
		}
	}
	f.Lost = logcheck.LostTxns(acked, evs)
	last := map[string]events.Event{}
	for _, le := range evs {
		e := le.Event
		if rejected[e.RequestID] {
			f.Rejected = append(f.Rejected, fmt.Sprintf("%s@%d of rejected transfer %s", e.Key, e.Version, e.RequestID))
		}
		if strings.HasPrefix(e.Key, transferScope+"/acct/") && e.Version > last[e.Key].Version {
			last[e.Key] = e
		}
	}
	f.Counters = len(last)
	for _, e := range last {
		if n, err := strconv.ParseInt(string(e.After), 10, 64); err == nil && e.Live() {
			f.Sum += n
		}
	}
	return f
}

func (f transferFindings) ok() bool { return len(f.Lost) == 0 && len(f.Rejected) == 0 && f.Sum == 0 }

// printTransfers prints the transfer workload and its findings.
func (r *report) printTransfers(w io.Writer) {
	outcomes := map[string]int{}
	for _, t := range r.transfers {
		outcomes[t.Outcome]++
	}
	n, by := countBy(outcomes)
	f := r.transfer
	fmt.Fprintf(w, "transactions: %d broken, %d lost, %d events of rejected ones (%d transfers: %s; %d transactions in the log; counters sum %d over %d keys, want 0)\n",
		len(r.logFindings.TxnBreaks), len(f.Lost), len(f.Rejected), n, by, r.logFindings.Txns, f.Sum, f.Counters)
	printFirst(w, slices.Concat(r.logFindings.TxnBreaks, f.Lost, f.Rejected))
}
