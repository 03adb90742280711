package main

import (
	"encoding/json"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/tools/linz"
)

// TestCommittedInTouch: a touch's event holds the value of the write it
// kept, so it does not settle that write (found at its own version); a
// touch is settled by its requestId, with the value it kept.
func TestCommittedInTouch(t *testing.T) {
	const key = "tenant/chaos/project/p0/reg"
	ev := func(v int64, op contract.Op, rid, value string) logcheck.Event {
		return logcheck.Event{Event: contract.Event{Key: key, Version: v, Kind: contract.KindPut, Op: op, RequestID: rid, After: mustJSON(value)}}
	}
	committed := committedIn([]logcheck.Event{
		ev(1, contract.OpCAS, "chaos-c0-0", "c0-0"),
		ev(2, contract.OpTouch, "chaos-touch-c1-1", "c0-0"),
	})
	write := linz.Op{In: linz.Input{Key: key, Kind: linz.Write, Value: "c0-0"}}
	if v, value, ok := committed(write); !ok || v != 1 || value != "c0-0" {
		t.Fatalf("the write: v%d %q %v, want v1 (not the touch's v2)", v, value, ok)
	}
	touch := linz.Op{In: linz.Input{Key: key, Kind: linz.Touch, Expected: 1}, RequestID: "chaos-touch-c1-1"}
	if v, value, ok := committed(touch); !ok || v != 2 || value != "c0-0" {
		t.Fatalf("the touch: v%d %q %v, want v2 keeping c0-0", v, value, ok)
	}
	touch.RequestID = "chaos-touch-c9-9"
	if _, _, ok := committed(touch); ok {
		t.Fatal("a touch the log does not hold was settled")
	}
	if got := (linz.Op{In: touch.In, Out: linz.Output{Outcome: linz.OK, Version: 2, Value: "c0-0"}}).Written(); got != "c0-0" {
		t.Fatalf("a touch wrote %q", got)
	}
	var b contract.TouchBody
	if err := json.Unmarshal([]byte(`{"ttlSeconds":3600,"expectedVersion":1}`), &b); err != nil || b.Validate() != nil {
		t.Fatalf("the workload's touch body: %v", err)
	}
}
