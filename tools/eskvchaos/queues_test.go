package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/projection/elemkey"
)

// TestQueuesCheck: the queue workload's check of the log finds an
// acknowledged write missing from it, an item acknowledged twice, a
// delivery while the item's visibility held (a second pop without a
// requeue, a requeue before the deadline), a delivery count that skips,
// metadata that does not count the fold, a pushed item never delivered,
// and a queue the drain left non-empty.
func TestQueuesCheck(t *testing.T) {
	key := queueKeys()[0]
	t0 := time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)
	a, b := elemkey.QueueMember(1, 0, 1), elemkey.QueueMember(1, 0, 2)
	ev := func(v int64, op contract.Op, member, state string, deliveries int64, size, inFlight int) logcheck.Event {
		el := &contract.Element{Op: contract.ElementAdd, Member: member, Value: json.RawMessage(`"` + member[34:] + `"`), State: state, Deliveries: deliveries}
		if state == "" {
			el.Op = contract.ElementRemove
		}
		if state == decide.ItemInFlight {
			deadline := t0.Add(time.Duration(v+2) * time.Second)
			el.VisibleAt = &deadline
		}
		return logcheck.Event{Offset: v, Event: contract.Event{Key: key, Version: v, Kind: contract.KindPut, Op: op, TS: t0.Add(time.Duration(v) * time.Second),
			After:   json.RawMessage(fmt.Sprintf(`{"type":"queue","size":%d,"since":1,"inFlight":%d}`, size, inFlight)),
			Element: el}}
	}
	log := []logcheck.Event{
		ev(1, contract.OpQPush, a, decide.ItemReady, 0, 1, 0),
		ev(2, contract.OpQPush, b, decide.ItemReady, 0, 2, 0),
		ev(3, contract.OpQPop, a, decide.ItemInFlight, 1, 2, 1), // deadline t0+5s
		ev(6, contract.OpQRequeue, a, decide.ItemReady, 1, 2, 0),
		ev(7, contract.OpQPop, a, decide.ItemInFlight, 2, 2, 1),
		ev(8, contract.OpQAck, a, "", 2, 1, 0),
		ev(9, contract.OpQPop, b, "", 0, 0, 0),
	}
	with := func(i int, e logcheck.Event) []logcheck.Event {
		out := append([]logcheck.Event(nil), log...)
		out[i] = e
		return out
	}
	acked := []queueChange{{key, 1, contract.OpQPush, a, `"0000000000000001"`, 0}, {key, 7, contract.OpQPop, a, `"0000000000000001"`, 2},
		{key, 8, contract.OpQAck, a, "", 2}}
	for _, tc := range []struct {
		name                                      string
		evs                                       []logcheck.Event
		acked                                     []queueChange
		left                                      int64
		missing, twice, folds, undelivered, sizes int
	}{
		{name: "OK", evs: log, acked: acked},
		{name: "ErrAcknowledgedNotInLog", evs: log, acked: []queueChange{{key, 10, contract.OpQPush, "x", `"x"`, 0}}, missing: 1},
		{name: "ErrOtherDelivery", evs: log, acked: []queueChange{{key, 7, contract.OpQPop, a, `"0000000000000001"`, 1}}, missing: 1},
		{name: "ErrAckedTwice", evs: log, acked: append(acked, queueChange{key, 9, contract.OpQAck, a, "", 1}), missing: 1, twice: 1},
		{name: "ErrPopWhileInFlight", evs: slices.Delete(slices.Clone(log), 3, 4), folds: 1},
		{name: "ErrRequeueBeforeDeadline", evs: with(3, ev(4, contract.OpQRequeue, a, decide.ItemReady, 1, 2, 0)), folds: 1},
		{name: "ErrDeliverySkipped", evs: with(4, ev(7, contract.OpQPop, a, decide.ItemInFlight, 3, 2, 1)), folds: 1},
		{name: "ErrMetadataOff", evs: with(1, ev(2, contract.OpQPush, b, decide.ItemReady, 0, 3, 0)), folds: 1},
		{name: "ErrNeverDelivered", evs: log[:6], undelivered: 1},
		{name: "ErrNotDrained", evs: log, left: 3, sizes: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueueWorkload(nil)
			q.acked = tc.acked
			q.left[key] = tc.left
			f, err := q.check(t.Context(), tc.evs, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.missing) != tc.missing || len(f.twice) != tc.twice || len(f.folds) != tc.folds ||
				len(f.undelivered) != tc.undelivered || len(f.sizes) != tc.sizes || f.events != len(tc.evs) {
				t.Fatalf("missing %q\ntwice %q\nfolds %q\nundelivered %q\nsizes %q\nwant %d, %d, %d, %d, %d",
					f.missing, f.twice, f.folds, f.undelivered, f.sizes, tc.missing, tc.twice, tc.folds, tc.undelivered, tc.sizes)
			}
		})
	}
}
