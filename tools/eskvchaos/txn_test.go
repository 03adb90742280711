package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
)

// TestTransfersCheck: the transaction workload's check of the log finds
// an applied transfer missing from it, a transaction not whole and
// accounts that stopped summing to 0.
func TestTransfersCheck(t *testing.T) {
	scope := txnScopes()[0]
	off := int64(0)
	// put is an event of a transfer txn (size 2) writing v to account i.
	put := func(i int, version int64, v int64, txn string) logcheck.Event {
		off++
		return logcheck.Event{Partition: 0, Offset: off, Event: contract.Event{Key: accountKey(scope, i), Version: version,
			Kind: contract.KindPut, After: json.RawMessage(fmt.Sprint(v)), TxnID: txn, TxnSize: 2}}
	}
	whole := []logcheck.Event{put(0, 1, -5, "t1"), put(1, 1, 5, "t1"), put(1, 2, -2, "t2"), put(2, 1, 7, "t2")}
	// del is an event of a range delete r of the 3 accounts.
	del := func(i int, version int64) logcheck.Event {
		off++
		return logcheck.Event{Partition: 0, Offset: off, Event: contract.Event{Key: accountKey(scope, i), Version: version,
			Kind: contract.KindDelete, Op: contract.OpDelete, After: json.RawMessage("null"), TxnID: "r", TxnSize: 3}}
	}
	cleared := append(slices.Clone(whole), del(0, 2), del(1, 3), del(2, 2))
	for _, tc := range []struct {
		name                            string
		evs                             []logcheck.Event
		acked                           map[string]int
		missing, notWhole, logSums, all int
	}{
		{"OK", whole, map[string]int{"t1": 2, "t2": 2}, 0, 0, 0, 0},
		{"OKAppliedUnacknowledged", whole, map[string]int{"t1": 2}, 0, 0, 0, 0},
		{"ErrAppliedNotInLog", whole, map[string]int{"t1": 2, "t3": 2}, 1, 0, 0, 1},
		{"ErrHalfATransaction", whole[:3], map[string]int{"t1": 2}, 0, 1, 1, 2},
		{"OKRangeDelete", cleared, map[string]int{"t1": 2, "t2": 2, "r": 3}, 0, 0, 0, 0},
		{"ErrHalfARangeDelete", cleared[:6], map[string]int{"t1": 2, "t2": 2, "r": 3}, 1, 1, 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTransfers(nil)
			tr.acked = tc.acked
			f, err := tr.check(t.Context(), tc.evs, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.missing) != tc.missing || len(f.log.Violations()) != tc.notWhole || len(f.logSums) != tc.logSums || len(f.violations()) != tc.all {
				t.Fatalf("missing %v, not whole %v, log sums %v; want %d, %d, %d", f.missing, f.log.Violations(), f.logSums, tc.missing, tc.notWhole, tc.logSums)
			}
		})
	}
}
