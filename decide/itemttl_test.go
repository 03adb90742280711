package decide

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/elemkey"
	"github.com/eskv/eskv/projection/keystate"
)

// TestDecideQueueItemTTL: a push with an item TTL gives its item its own
// expiry (pushedAt + TTL) that the pop's in-flight state keeps; a pop
// never serves an item past it; the sweeper's qexpire removes a ready or
// in-flight item past it (kept done with a dedupId, size-1, inFlight-1
// when in flight), and appends nothing when a pop or ack won the race or
// the TTL has not passed; an ack before the qexpire is accepted; a
// requeue leaves an expired item to the qexpire.
func TestDecideQueueItemTTL(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/tasks")
	queue := func(size, inFlight int64) keystate.State {
		meta, _ := json.Marshal(contract.CollectionMeta{Type: "queue", Size: size, Since: 1, InFlight: inFlight})
		return keystate.State{Version: 6, Live: true, Entry: contract.Entry{Key: key.String(), Version: 6, Value: meta,
			CreatedAt: now.Add(-time.Hour), Semantics: contract.Semantics{Purpose: "queue"}}}
	}
	meta := func(size, inFlight int64) *contract.CollectionMeta {
		return &contract.CollectionMeta{Type: "queue", Size: size, Since: 1, InFlight: inFlight}
	}
	at := func(t time.Time) *time.Time { return &t }
	pushedAt, past, future := now.Add(-time.Minute), now.Add(-time.Second), now.Add(time.Minute)
	m := elemkey.QueueMember(1, 0, 3)
	item := func(state string, deliveries int64, visibleAt, expiresAt *time.Time, dedup string) *contract.Element {
		return &contract.Element{Op: contract.ElementAdd, Member: m, Value: json.RawMessage(`1`), State: state, Deliveries: deliveries,
			VisibleAt: visibleAt, DedupID: dedup, PushedAt: &pushedAt, ExpiresAt: expiresAt}
	}
	removed := func(deliveries int64, expiresAt *time.Time) *contract.Element {
		el := item("", deliveries, nil, expiresAt, "")
		el.Op = contract.ElementRemove
		return el
	}
	for _, tc := range []struct {
		name    string
		cur     keystate.State
		in      QueueInput
		req     fixture
		code    string
		meta    *contract.CollectionMeta
		element *contract.Element
	}{
		{"OKPushWithItemTTL", queue(1, 0), QueueInput{}, fixture{Op: contract.OpQPush, Value: json.RawMessage(`1`), ItemTTL: 90},
			"", meta(2, 0), &contract.Element{Op: "add", Member: elemkey.QueueMember(1, 0, 7), Value: json.RawMessage(`1`), State: "ready",
				PushedAt: &now, ExpiresAt: at(now.Add(90 * time.Second))}},
		{"OKPopKeepsExpiry", queue(1, 0), QueueInput{Head: item("ready", 0, nil, &future, "")}, fixture{Op: contract.OpQPop, Visibility: 30},
			"", meta(1, 1), item("inflight", 1, at(now.Add(30*time.Second)), &future, "")},
		{"ErrPopExpiredHead", queue(1, 0), QueueInput{Head: item("ready", 0, nil, &past, "")}, fixture{Op: contract.OpQPop}, contract.EQueueEmpty, nil, nil},
		{"OKExpireReady", queue(2, 0), QueueInput{Item: item("ready", 0, nil, &past, "")}, fixture{Op: contract.OpQExpire, Item: m},
			"", meta(1, 0), removed(0, &past)},
		{"OKExpireInFlight", queue(2, 1), QueueInput{Item: item("inflight", 1, &future, &past, "")}, fixture{Op: contract.OpQExpire, Item: m},
			"", meta(1, 0), removed(1, &past)},
		{"OKExpireWithDedupKeepsDone", queue(2, 1), QueueInput{Item: item("inflight", 2, &future, &past, "d")}, fixture{Op: contract.OpQExpire, Item: m},
			"", meta(1, 0), item("done", 2, nil, &past, "d")},
		{"ErrExpireBeforeTTL", queue(2, 0), QueueInput{Item: item("ready", 0, nil, &future, "")}, fixture{Op: contract.OpQExpire, Item: m}, contract.EConflict, nil, nil},
		{"ErrExpireNoTTL", queue(2, 0), QueueInput{Item: item("ready", 0, nil, nil, "")}, fixture{Op: contract.OpQExpire, Item: m}, contract.EConflict, nil, nil},
		{"ErrExpireAfterPopRemoved", queue(1, 0), QueueInput{}, fixture{Op: contract.OpQExpire, Item: m}, contract.EConflict, nil, nil},
		{"ErrExpireAfterAckDone", queue(1, 0), QueueInput{Item: item("done", 1, nil, &past, "d")}, fixture{Op: contract.OpQExpire, Item: m}, contract.EConflict, nil, nil},
		{"OKAckPastTTLBeforeExpire", queue(2, 1), QueueInput{Item: item("inflight", 1, &future, &past, "")}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1},
			"", meta(1, 0), removed(1, &past)},
		{"ErrAckAfterExpire", queue(1, 0), QueueInput{}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrRequeueExpired", queue(2, 1), QueueInput{Item: item("inflight", 1, &past, &past, "")}, fixture{Op: contract.OpQRequeue, Item: m, Delivery: 1}, contract.EConflict, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Principal = key, "p"
			d := decideQueue(queueOf(&r), Input{State: tc.cur, Queue: tc.in}, testEnv(now, 1))
			if tc.code != "" {
				if contract.ErrorCode(d.Err) != tc.code || d.Event != nil {
					t.Fatalf("error %v event %v, want %s and nothing appended", d.Err, d.Event, tc.code)
				}
				return
			}
			if d.Err != nil || d.Event == nil || d.Event.Op != r.Op {
				t.Fatalf("error %v event %+v, want one %s", d.Err, d.Event, r.Op)
			}
			got, err := contract.ParseCollectionMeta(d.Event.After)
			if err != nil || got != *tc.meta {
				t.Fatalf("after %s (%v), want %+v", d.Event.After, err, *tc.meta)
			}
			if !reflect.DeepEqual(d.Event.Element, tc.element) {
				t.Fatalf("element %+v, want %+v", d.Event.Element, tc.element)
			}
		})
	}
}
