package main

import (
	"encoding/json"
	"testing"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/internal/logcheck"
)

func TestClassifyTransfer(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    answer
		want string
	}{
		{"OK", answer{status: 200, sent: true, body: []byte(`{"txnId":"t1","results":[{"key":"a","version":2},{"key":"b","version":3}]}`)}, "ok"},
		{"RejectedByTheCheck", answer{status: 409, sent: true, body: []byte(`{"error":{"code":"version_conflict","field":"ops[2].condition.exists","failedOp":2,"currentVersion":0}}`)}, "rejected"},
		{"OtherConflictIsUnknown", answer{status: 409, sent: true, body: []byte(`{"error":{"code":"version_conflict","field":"requestId","failedOp":0}}`)}, "unknown"},
		{"NotOwnedIsNoEffect", answer{status: 503, sent: true, body: []byte(`{"error":{"code":"partition_unavailable","message":"partition 3 is not owned by this writer; retry"}}`)}, "failed"},
		{"CommitFailedIsUnknown", answer{status: 503, sent: true, body: []byte(`{"error":{"code":"partition_unavailable","message":"partition 3 is unable to commit the write (its outcome is unknown: retry with the same requestId); retry"}}`)}, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classifyTransfer(tc.a); got.Outcome != tc.want {
				t.Fatalf("got %+v, want %s", got, tc.want)
			}
		})
	}
}

func TestCheckTransfers(t *testing.T) {
	ev := func(off int64, key string, version int64, after, txnID, requestID string) logcheck.Event {
		return logcheck.Event{Offset: off, Event: events.Event{Key: key, Version: version, Kind: events.KindPut, After: json.RawMessage(after),
			TxnID: txnID, TxnSize: 2, RequestID: requestID}}
	}
	a, b := transferKey(0), transferKey(1)
	good := []logcheck.Event{ev(0, a, 1, `-1`, "t1", "r1"), ev(1, b, 1, `1`, "t1", "r1"), ev(2, b, 2, `0`, "t2", "r2"), ev(3, a, 2, `0`, "t2", "r2")}
	ts := []transfer{{RequestID: "r1", Outcome: "ok", TxnID: "t1"}, {RequestID: "r2", Outcome: "unknown"}, {RequestID: "r3", Outcome: "rejected"}}
	if f := checkTransfers(ts, good); !f.ok() || f.Counters != 2 {
		t.Fatalf("%+v", f)
	}
	if f := checkTransfers(ts, good[:3]); f.Sum != -1 || f.ok() {
		t.Fatalf("half a transfer must break the sum: %+v", f)
	}
	if f := checkTransfers(append(ts, transfer{RequestID: "r9", Outcome: "ok", TxnID: "t9"}), good); len(f.Lost) != 1 {
		t.Fatalf("an acknowledged transfer missing from the log: %+v", f)
	}
	bad := append(good[:4:4], ev(4, a, 3, `-1`, "t3", "r3"), ev(5, b, 3, `1`, "t3", "r3"))
	if f := checkTransfers(ts, bad); len(f.Rejected) != 2 || f.ok() {
		t.Fatalf("events of a rejected transfer: %+v", f)
	}
}
