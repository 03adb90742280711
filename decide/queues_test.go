package decide

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/elemkey"
	"github.com/eskv/eskv/projection/keystate"
)

// TestDecideQueue: pushes, pops, acks and the sweeper's requeues against
// the queue's metadata and the one item each decides on: the item's new
// state each event carries, the new metadata, and when nothing is
// appended (empty queue, stale receipt, duplicate, lost race).
func TestDecideQueue(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/tasks")
	queue := func(v, size, inFlight, since int64) keystate.State {
		meta, _ := json.Marshal(contract.CollectionMeta{Type: "queue", Size: size, Since: since, InFlight: inFlight})
		return keystate.State{Version: v, Live: true, Entry: contract.Entry{Key: key.String(), Version: v, Value: meta,
			CreatedAt: now.Add(-time.Hour), Semantics: contract.Semantics{Purpose: "queue"}}}
	}
	deleted := keystate.State{Version: 9, Entry: contract.Entry{Key: key.String(), Version: 9}}
	list := keystate.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: json.RawMessage(`{"type":"list","size":1,"since":1}`),
		Semantics: contract.Semantics{Purpose: "list"}}}
	meta := func(size, inFlight, since int64) *contract.CollectionMeta {
		return &contract.CollectionMeta{Type: "queue", Size: size, Since: since, InFlight: inFlight}
	}
	pushed := now.Add(-time.Minute)
	deadline := now.Add(-time.Second) // passed
	later := now.Add(30 * time.Second)
	m := elemkey.QueueMember(1, -2, 3)
	old := elemkey.QueueMember(1, 0, 2) // of incarnation 1, the queue's since being 10 below
	item := func(member, state string, deliveries int64, visibleAt *time.Time, dedup string) *contract.Element {
		return &contract.Element{Op: contract.ElementAdd, Member: member, Value: json.RawMessage(`{"job":1}`), State: state,
			Deliveries: deliveries, VisibleAt: visibleAt, DedupID: dedup, PushedAt: &pushed}
	}
	removed := func(member string, deliveries int64) *contract.Element {
		el := item(member, "", deliveries, nil, "")
		el.Op = contract.ElementRemove
		return el
	}
	at := func(t time.Time) *time.Time { return &t }
	ready, inflight := item(m, ItemReady, 0, nil, ""), item(m, ItemInFlight, 1, &deadline, "")
	const nonce, other = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	withNonce := func(el *contract.Element, n string) *contract.Element {
		c := *el
		c.ReceiptNonce = n
		return &c
	}
	delivered := withNonce(inflight, nonce) // popped since receipts have a nonce
	for _, tc := range []struct {
		name    string
		cur     keystate.State
		in      QueueInput
		req     fixture
		code    string                   // error code, or "" when accepted
		meta    *contract.CollectionMeta // after; nil: nothing appended
		element *contract.Element
	}{
		{"OKPushCreates", keystate.State{}, QueueInput{}, fixture{Op: contract.OpQPush, Value: json.RawMessage(`{"job":1}`), Priority: -2},
			"", meta(1, 0, 1), &contract.Element{Op: "add", Member: elemkey.QueueMember(1, -2, 1), Value: json.RawMessage(`{"job":1}`), State: "ready", PushedAt: &now}},
		{"OKPushAppends", queue(5, 2, 1, 1), QueueInput{}, fixture{Op: contract.OpQPush, Value: json.RawMessage(`7`), Priority: 3, DedupID: "d"},
			"", meta(3, 1, 1), &contract.Element{Op: "add", Member: elemkey.QueueMember(1, 3, 6), Value: json.RawMessage(`7`), State: "ready", DedupID: "d", PushedAt: &now}},
		{"OKPushAfterDeleteStartsAfresh", deleted, QueueInput{}, fixture{Op: contract.OpQPush, Value: json.RawMessage(`7`)},
			"", meta(1, 0, 10), &contract.Element{Op: "add", Member: elemkey.QueueMember(10, 0, 10), Value: json.RawMessage(`7`), State: "ready", PushedAt: &now}},
		{"OKPushDuplicateAddsNothing", queue(5, 1, 0, 1), QueueInput{Dup: item(m, "ready", 0, nil, "d")}, fixture{Op: contract.OpQPush, Value: json.RawMessage(`7`), DedupID: "d"},
			"", nil, item(m, "ready", 0, nil, "d")},
		{"OKPushDuplicateOfDoneItemAddsNothing", queue(5, 0, 0, 1), QueueInput{Dup: item(m, "done", 1, nil, "d")}, fixture{Op: contract.OpQPush, Value: json.RawMessage(`7`), DedupID: "d"},
			"", nil, item(m, "done", 1, nil, "d")},
		{"OKPushDuplicatePastWindowAdds", queue(5, 1, 0, 1), QueueInput{Dup: &contract.Element{Member: m, State: "ready", DedupID: "d", PushedAt: at(now.Add(-DefaultQueueDedupWindow))}},
			fixture{Op: contract.OpQPush, Value: json.RawMessage(`7`), DedupID: "d"},
			"", meta(2, 0, 1), &contract.Element{Op: "add", Member: elemkey.QueueMember(1, 0, 6), Value: json.RawMessage(`7`), State: "ready", DedupID: "d", PushedAt: &now}},
		{"OKPushDuplicateOfEarlierQueueAdds", queue(12, 0, 0, 10), QueueInput{Dup: item(old, "ready", 0, nil, "d")}, fixture{Op: contract.OpQPush, Value: json.RawMessage(`7`), DedupID: "d"},
			"", meta(1, 0, 10), &contract.Element{Op: "add", Member: elemkey.QueueMember(10, 0, 13), Value: json.RawMessage(`7`), State: "ready", DedupID: "d", PushedAt: &now}},
		{"ErrPushWrongType", list, QueueInput{}, fixture{Op: contract.OpQPush, Value: json.RawMessage(`7`)}, contract.EWrongType, nil, nil},

		{"OKPopRemoves", queue(5, 2, 0, 1), QueueInput{Head: ready}, fixture{Op: contract.OpQPop}, "", meta(1, 0, 1), removed(m, 1)},
		{"OKPopWithDedupKeepsDone", queue(5, 2, 0, 1), QueueInput{Head: item(m, "ready", 0, nil, "d")}, fixture{Op: contract.OpQPop},
			"", meta(1, 0, 1), item(m, "done", 1, nil, "d")},
		{"OKPopWithVisibilityGoesInFlight", queue(5, 2, 0, 1), QueueInput{Head: ready, Nonce: nonce}, fixture{Op: contract.OpQPop, Visibility: 30},
			"", meta(2, 1, 1), withNonce(item(m, "inflight", 1, &later, ""), nonce)},
		{"OKPopRedelivers", queue(5, 2, 0, 1), QueueInput{Head: item(m, "ready", 1, nil, ""), Nonce: other}, fixture{Op: contract.OpQPop, Visibility: 30},
			"", meta(2, 1, 1), withNonce(item(m, "inflight", 2, &later, ""), other)},
		{"OKPopRemovingKeepsNoNonce", queue(5, 2, 0, 1), QueueInput{Head: ready, Nonce: nonce}, fixture{Op: contract.OpQPop}, "", meta(1, 0, 1), removed(m, 1)},
		{"ErrPopEmpty", queue(5, 0, 0, 1), QueueInput{}, fixture{Op: contract.OpQPop}, contract.EQueueEmpty, nil, nil},
		{"ErrPopMissing", keystate.State{}, QueueInput{}, fixture{Op: contract.OpQPop}, contract.EQueueEmpty, nil, nil},
		{"ErrPopDeleted", deleted, QueueInput{}, fixture{Op: contract.OpQPop}, contract.EQueueEmpty, nil, nil},
		{"ErrPopAllInFlight", queue(5, 2, 2, 1), QueueInput{}, fixture{Op: contract.OpQPop}, contract.EQueueEmpty, nil, nil},
		{"ErrPopOnlyExpiredItemsLeft", queue(5, 2, 0, 1), QueueInput{}, fixture{Op: contract.OpQPop}, contract.EQueueEmpty, nil, nil},
		{"ErrPopItemOfEarlierQueue", queue(12, 1, 0, 10), QueueInput{Head: item(old, "ready", 0, nil, "")}, fixture{Op: contract.OpQPop}, contract.EInternal, nil, nil},

		{"OKAckRemoves", queue(6, 2, 1, 1), QueueInput{Item: inflight}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1}, "", meta(1, 0, 1), removed(m, 1)},
		{"OKAckWithDedupKeepsDone", queue(6, 2, 1, 1), QueueInput{Item: item(m, "inflight", 1, &later, "d")}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1},
			"", meta(1, 0, 1), item(m, "done", 1, nil, "d")},
		{"OKAckPastDeadlineBeforeRequeue", queue(6, 1, 1, 1), QueueInput{Item: inflight}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1}, "", meta(0, 0, 1), removed(m, 1)},
		{"OKAckWithNonce", queue(6, 2, 1, 1), QueueInput{Item: delivered}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1, ReceiptNonce: nonce}, "", meta(1, 0, 1), removed(m, 1)},
		{"OKAckWithNonceKeepsDoneWithout", queue(6, 2, 1, 1), QueueInput{Item: withNonce(item(m, "inflight", 1, &later, "d"), nonce)},
			fixture{Op: contract.OpQAck, Item: m, Delivery: 1, ReceiptNonce: nonce}, "", meta(1, 0, 1), item(m, "done", 1, nil, "d")},
		{"ErrAckGuessedWithoutNonce", queue(6, 2, 1, 1), QueueInput{Item: delivered}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrAckWrongNonce", queue(6, 2, 1, 1), QueueInput{Item: delivered}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1, ReceiptNonce: other}, contract.EStaleReceipt, nil, nil},
		{"ErrAckNonceOfDeliveryWithout", queue(6, 2, 1, 1), QueueInput{Item: inflight}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1, ReceiptNonce: nonce}, contract.EStaleReceipt, nil, nil},
		{"ErrAckUnknownItem", queue(6, 1, 1, 1), QueueInput{}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrAckRequeued", queue(6, 1, 0, 1), QueueInput{Item: item(m, "ready", 1, nil, "")}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrAckRedelivered", queue(6, 1, 1, 1), QueueInput{Item: item(m, "inflight", 2, &later, "")}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrAckDone", queue(6, 0, 0, 1), QueueInput{Item: item(m, "done", 1, nil, "d")}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrAckEarlierQueue", queue(12, 1, 1, 10), QueueInput{Item: item(old, "inflight", 1, &later, "")}, fixture{Op: contract.OpQAck, Item: old, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrAckMissingQueue", deleted, QueueInput{Item: inflight}, fixture{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},

		{"OKRequeuePastDeadline", queue(6, 2, 1, 1), QueueInput{Item: inflight}, fixture{Op: contract.OpQRequeue, Item: m, Delivery: 1},
			"", meta(2, 0, 1), item(m, "ready", 1, nil, "")},
		{"OKRequeueDropsNonce", queue(6, 2, 1, 1), QueueInput{Item: delivered}, fixture{Op: contract.OpQRequeue, Item: m, Delivery: 1},
			"", meta(2, 0, 1), item(m, "ready", 1, nil, "")},
		{"ErrRequeueBeforeDeadline", queue(6, 2, 1, 1), QueueInput{Item: item(m, "inflight", 1, &later, "")}, fixture{Op: contract.OpQRequeue, Item: m, Delivery: 1}, contract.EConflict, nil, nil},
		{"ErrRequeueAcked", queue(7, 1, 0, 1), QueueInput{}, fixture{Op: contract.OpQRequeue, Item: m, Delivery: 1}, contract.EConflict, nil, nil},
		{"ErrRequeueRedelivered", queue(8, 1, 1, 1), QueueInput{Item: item(m, "inflight", 2, &deadline, "")}, fixture{Op: contract.OpQRequeue, Item: m, Delivery: 1}, contract.EConflict, nil, nil},
		{"ErrRequeueRequeuedAlready", queue(7, 1, 0, 1), QueueInput{Item: item(m, "ready", 1, nil, "")}, fixture{Op: contract.OpQRequeue, Item: m, Delivery: 1}, contract.EConflict, nil, nil},
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
			if d.Err != nil {
				t.Fatal(d.Err)
			}
			if tc.meta == nil {
				if d.Event != nil || d.Result.Changed || !d.Result.Deduplicated || !reflect.DeepEqual(d.Result.Element, tc.element) {
					t.Fatalf("Decision %+v, want a deduplicated answer %+v appending nothing", d, tc.element)
				}
				return
			}
			if d.Event == nil || d.Event.Op != r.Op || d.Event.Semantics.Purpose != "queue" || !d.Result.Changed {
				t.Fatalf("event %+v, want one %s of a queue", d.Event, r.Op)
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

// TestStaleReceiptIsGeneric: every stale receipt is answered the same
// message, whatever the item's state: it describes no delivery (another
// consumer's, say) to whoever holds the receipt, which may be a guess.
func TestStaleReceiptIsGeneric(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/tasks")
	meta, _ := json.Marshal(contract.CollectionMeta{Type: "queue", Size: 2, Since: 1, InFlight: 1})
	cur := keystate.State{Version: 6, Live: true, Entry: contract.Entry{Key: key.String(), Version: 6, Value: meta, Semantics: contract.Semantics{Purpose: "queue"}}}
	m, old := elemkey.QueueMember(1, 0, 2), elemkey.QueueMember(0, 0, 1)
	later, past := now.Add(time.Minute), now.Add(-time.Second)
	const nonce = "0123456789abcdef0123456789abcdef"
	var messages []string
	for _, tc := range []struct {
		name string
		item *contract.Element
		req  fixture
	}{
		{"NoItem", nil, fixture{Item: m, Delivery: 1}},
		{"Acknowledged", &contract.Element{Member: m, State: ItemDone}, fixture{Item: m, Delivery: 1}},
		{"ExpiredDone", &contract.Element{Member: m, State: ItemDone, DedupID: "d", ExpiresAt: &past}, fixture{Item: m, Delivery: 1}},
		{"Requeued", &contract.Element{Member: m, State: ItemReady, Deliveries: 1}, fixture{Item: m, Delivery: 1}},
		{"Redelivered", &contract.Element{Member: m, State: ItemInFlight, Deliveries: 2, VisibleAt: &later, ReceiptNonce: nonce}, fixture{Item: m, Delivery: 1}},
		{"GuessedNonce", &contract.Element{Member: m, State: ItemInFlight, Deliveries: 1, VisibleAt: &later, ReceiptNonce: nonce}, fixture{Item: m, Delivery: 1}},
		{"EarlierQueue", &contract.Element{Member: old, State: ItemInFlight, Deliveries: 1, VisibleAt: &later}, fixture{Item: old, Delivery: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Op, r.Principal = key, contract.OpQAck, "p"
			d := decideQueue(queueOf(&r), Input{State: cur, Queue: QueueInput{Item: tc.item}}, testEnv(now, 1))
			var e *contract.Error
			if !errors.As(d.Err, &e) || e.Code != contract.EStaleReceipt || e.Field != "receipt" || e.Current != nil || d.Event != nil {
				t.Fatalf("%v, want stale_receipt on receipt without the entry, appending nothing", d.Err)
			}
			messages = append(messages, e.Message)
		})
	}
	for _, msg := range messages {
		if msg != messages[0] || strings.ContainsAny(msg, "0123456789") {
			t.Fatalf("stale_receipt messages differ or name a delivery: %q", messages)
		}
	}
}

// TestDecideQueueReplays: a push or pop retried with its requestId while
// it is the queue's latest write is a replay appending nothing: a push
// answers its item, a pop the item and receipt it popped (from the
// overlay, the batch or kv_history), also after the queue was written
// again (within the window); an older push is stale.
func TestDecideQueueReplays(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/tasks")
	pop := &fixture{Key: key, Op: contract.OpQPop, Visibility: 30, RequestID: "R", Principal: "p"}
	push := &fixture{Key: key, Op: contract.OpQPush, Value: json.RawMessage(`"x"`), Priority: 4, RequestID: "P", Principal: "p"}
	after := func(r *fixture, v int64) keystate.State {
		return keystate.State{Version: v, Live: true, RequestDigest: r.Digest(), Entry: contract.Entry{Key: key.String(), Version: v,
			Value: json.RawMessage(`{"type":"queue","size":2,"since":1,"inFlight":1}`), RequestID: r.RequestID, Semantics: contract.Semantics{Purpose: "queue"}}}
	}
	deadline := now.Add(20 * time.Second)
	popped := &contract.Element{Op: contract.ElementAdd, Member: elemkey.QueueMember(1, 0, 2), Value: json.RawMessage(`{"job":7}`),
		State: ItemInFlight, Deliveries: 1, VisibleAt: &deadline, ReceiptNonce: "0123456789abcdef0123456789abcdef"}
	ref := RequestRef{Key: key.String(), RequestID: "R"}
	d := decideQueue(queueOf(pop), Input{State: after(pop, 5), Known: Memory{ref: {Version: 5, Digest: pop.Digest(), Popped: popped}}}, testEnv(now, 1))
	a := QueuePopAnswer(d.Result, queueOf(pop))
	if d.Event != nil || !d.Result.Replayed || string(a.Data) != `{"job":7}` || a.Receipt != contract.Receipt(popped.Member, 1, popped.ReceiptNonce) ||
		a.Deadline == nil || !a.Deadline.Equal(deadline) || a.Size != 2 || a.Version != 5 {
		t.Fatalf("replayed pop: %+v %+v, want the popped item and receipt", d, a)
	}
	// The queue was written since (a push at 6): the retried pop still
	// answers its item, receipt and deadline, at the pop's version.
	older := Memory{ref: {Version: 5, Digest: pop.Digest(), Popped: popped, After: after(pop, 5).Entry.Value}}
	d = decideQueue(queueOf(pop), Input{State: after(push, 6), Known: older}, testEnv(now, 1))
	a = QueuePopAnswer(d.Result, queueOf(pop))
	if d.Event != nil || d.Err != nil || !d.Result.Replayed || string(a.Data) != `{"job":7}` || a.Receipt != contract.Receipt(popped.Member, 1, popped.ReceiptNonce) ||
		a.Deadline == nil || !a.Deadline.Equal(deadline) || a.Size != 2 || a.Version != 5 {
		t.Fatalf("older pop retried: %+v %+v, want the popped item and receipt at version 5", d, a)
	}
	d = decideQueue(queueOf(push), Input{State: after(pop, 6), Known: Memory{RequestRef{Key: key.String(), RequestID: "P"}: {Version: 5, Digest: push.Digest()}}}, testEnv(now, 1))
	if contract.ErrorCode(d.Err) != contract.EConflict || d.Event != nil {
		t.Fatalf("older push retried: %+v, want version_conflict", d)
	}
	d = decideQueue(queueOf(push), Input{State: after(push, 6)}, testEnv(now, 1))
	if pa := QueuePushAnswer(d.Result, queueOf(push)); !d.Result.Replayed || pa.Item != elemkey.QueueMember(1, 4, 6) || pa.Priority != 4 {
		t.Fatalf("replayed push: %+v %+v, want its item", d, pa)
	}
}
