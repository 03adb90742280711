package writer

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// TestDecideQueue: pushes, pops, acks and the sweeper's requeues against
// the queue's metadata and the one item each decides on: the item's new
// state each event carries, the new metadata, and when nothing is
// appended (empty queue, stale receipt, duplicate, lost race).
func TestDecideQueue(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/tasks")
	queue := func(v, size, inFlight, since int64) contract.State {
		meta, _ := json.Marshal(contract.CollectionMeta{Type: "queue", Size: size, Since: since, InFlight: inFlight})
		return contract.State{Version: v, Live: true, Entry: contract.Entry{Key: key.String(), Version: v, Value: meta,
			CreatedAt: now.Add(-time.Hour), Semantics: contract.Semantics{Purpose: "queue"}}}
	}
	deleted := contract.State{Version: 9, Entry: contract.Entry{Key: key.String(), Version: 9}}
	list := contract.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: json.RawMessage(`{"type":"list","size":1,"since":1}`),
		Semantics: contract.Semantics{Purpose: "list"}}}
	meta := func(size, inFlight, since int64) *contract.CollectionMeta {
		return &contract.CollectionMeta{Type: "queue", Size: size, Since: since, InFlight: inFlight}
	}
	pushed := now.Add(-time.Minute)
	deadline := now.Add(-time.Second) // passed
	later := now.Add(30 * time.Second)
	m := projection.QueueMember(1, -2, 3)
	old := projection.QueueMember(1, 0, 2) // of incarnation 1, the queue's since being 10 below
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
	ready, inflight := item(m, contract.ItemReady, 0, nil, ""), item(m, contract.ItemInFlight, 1, &deadline, "")
	const nonce, other = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	withNonce := func(el *contract.Element, n string) *contract.Element {
		c := *el
		c.ReceiptNonce = n
		return &c
	}
	delivered := withNonce(inflight, nonce) // popped since receipts have a nonce
	for _, tc := range []struct {
		name    string
		cur     contract.State
		in      queueInput
		req     Request
		code    string                   // error code, or "" when accepted
		meta    *contract.CollectionMeta // after; nil: nothing appended
		element *contract.Element
	}{
		{"OKPushCreates", contract.State{}, queueInput{}, Request{Op: contract.OpQPush, Value: json.RawMessage(`{"job":1}`), Priority: -2},
			"", meta(1, 0, 1), &contract.Element{Op: "add", Member: projection.QueueMember(1, -2, 1), Value: json.RawMessage(`{"job":1}`), State: "ready", PushedAt: &now}},
		{"OKPushAppends", queue(5, 2, 1, 1), queueInput{}, Request{Op: contract.OpQPush, Value: json.RawMessage(`7`), Priority: 3, DedupID: "d"},
			"", meta(3, 1, 1), &contract.Element{Op: "add", Member: projection.QueueMember(1, 3, 6), Value: json.RawMessage(`7`), State: "ready", DedupID: "d", PushedAt: &now}},
		{"OKPushAfterDeleteStartsAfresh", deleted, queueInput{}, Request{Op: contract.OpQPush, Value: json.RawMessage(`7`)},
			"", meta(1, 0, 10), &contract.Element{Op: "add", Member: projection.QueueMember(10, 0, 10), Value: json.RawMessage(`7`), State: "ready", PushedAt: &now}},
		{"OKPushDuplicateAddsNothing", queue(5, 1, 0, 1), queueInput{dup: item(m, "ready", 0, nil, "d")}, Request{Op: contract.OpQPush, Value: json.RawMessage(`7`), DedupID: "d"},
			"", nil, item(m, "ready", 0, nil, "d")},
		{"OKPushDuplicateOfDoneItemAddsNothing", queue(5, 0, 0, 1), queueInput{dup: item(m, "done", 1, nil, "d")}, Request{Op: contract.OpQPush, Value: json.RawMessage(`7`), DedupID: "d"},
			"", nil, item(m, "done", 1, nil, "d")},
		{"OKPushDuplicatePastWindowAdds", queue(5, 1, 0, 1), queueInput{dup: &contract.Element{Member: m, State: "ready", DedupID: "d", PushedAt: at(now.Add(-DefaultQueueDedupWindow))}},
			Request{Op: contract.OpQPush, Value: json.RawMessage(`7`), DedupID: "d"},
			"", meta(2, 0, 1), &contract.Element{Op: "add", Member: projection.QueueMember(1, 0, 6), Value: json.RawMessage(`7`), State: "ready", DedupID: "d", PushedAt: &now}},
		{"OKPushDuplicateOfEarlierQueueAdds", queue(12, 0, 0, 10), queueInput{dup: item(old, "ready", 0, nil, "d")}, Request{Op: contract.OpQPush, Value: json.RawMessage(`7`), DedupID: "d"},
			"", meta(1, 0, 10), &contract.Element{Op: "add", Member: projection.QueueMember(10, 0, 13), Value: json.RawMessage(`7`), State: "ready", DedupID: "d", PushedAt: &now}},
		{"ErrPushWrongType", list, queueInput{}, Request{Op: contract.OpQPush, Value: json.RawMessage(`7`)}, contract.EWrongType, nil, nil},

		{"OKPopRemoves", queue(5, 2, 0, 1), queueInput{head: ready}, Request{Op: contract.OpQPop}, "", meta(1, 0, 1), removed(m, 1)},
		{"OKPopWithDedupKeepsDone", queue(5, 2, 0, 1), queueInput{head: item(m, "ready", 0, nil, "d")}, Request{Op: contract.OpQPop},
			"", meta(1, 0, 1), item(m, "done", 1, nil, "d")},
		{"OKPopWithVisibilityGoesInFlight", queue(5, 2, 0, 1), queueInput{head: ready, nonce: nonce}, Request{Op: contract.OpQPop, Visibility: 30},
			"", meta(2, 1, 1), withNonce(item(m, "inflight", 1, &later, ""), nonce)},
		{"OKPopRedelivers", queue(5, 2, 0, 1), queueInput{head: item(m, "ready", 1, nil, ""), nonce: other}, Request{Op: contract.OpQPop, Visibility: 30},
			"", meta(2, 1, 1), withNonce(item(m, "inflight", 2, &later, ""), other)},
		{"OKPopRemovingKeepsNoNonce", queue(5, 2, 0, 1), queueInput{head: ready, nonce: nonce}, Request{Op: contract.OpQPop}, "", meta(1, 0, 1), removed(m, 1)},
		{"ErrPopEmpty", queue(5, 0, 0, 1), queueInput{}, Request{Op: contract.OpQPop}, contract.EQueueEmpty, nil, nil},
		{"ErrPopMissing", contract.State{}, queueInput{}, Request{Op: contract.OpQPop}, contract.EQueueEmpty, nil, nil},
		{"ErrPopDeleted", deleted, queueInput{}, Request{Op: contract.OpQPop}, contract.EQueueEmpty, nil, nil},
		{"ErrPopAllInFlight", queue(5, 2, 2, 1), queueInput{}, Request{Op: contract.OpQPop}, contract.EQueueEmpty, nil, nil},
		{"ErrPopOnlyExpiredItemsLeft", queue(5, 2, 0, 1), queueInput{}, Request{Op: contract.OpQPop}, contract.EQueueEmpty, nil, nil},
		{"ErrPopItemOfEarlierQueue", queue(12, 1, 0, 10), queueInput{head: item(old, "ready", 0, nil, "")}, Request{Op: contract.OpQPop}, contract.EInternal, nil, nil},

		{"OKAckRemoves", queue(6, 2, 1, 1), queueInput{item: inflight}, Request{Op: contract.OpQAck, Item: m, Delivery: 1}, "", meta(1, 0, 1), removed(m, 1)},
		{"OKAckWithDedupKeepsDone", queue(6, 2, 1, 1), queueInput{item: item(m, "inflight", 1, &later, "d")}, Request{Op: contract.OpQAck, Item: m, Delivery: 1},
			"", meta(1, 0, 1), item(m, "done", 1, nil, "d")},
		{"OKAckPastDeadlineBeforeRequeue", queue(6, 1, 1, 1), queueInput{item: inflight}, Request{Op: contract.OpQAck, Item: m, Delivery: 1}, "", meta(0, 0, 1), removed(m, 1)},
		{"OKAckWithNonce", queue(6, 2, 1, 1), queueInput{item: delivered}, Request{Op: contract.OpQAck, Item: m, Delivery: 1, ReceiptNonce: nonce}, "", meta(1, 0, 1), removed(m, 1)},
		{"OKAckWithNonceKeepsDoneWithout", queue(6, 2, 1, 1), queueInput{item: withNonce(item(m, "inflight", 1, &later, "d"), nonce)},
			Request{Op: contract.OpQAck, Item: m, Delivery: 1, ReceiptNonce: nonce}, "", meta(1, 0, 1), item(m, "done", 1, nil, "d")},
		{"ErrAckGuessedWithoutNonce", queue(6, 2, 1, 1), queueInput{item: delivered}, Request{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrAckWrongNonce", queue(6, 2, 1, 1), queueInput{item: delivered}, Request{Op: contract.OpQAck, Item: m, Delivery: 1, ReceiptNonce: other}, contract.EStaleReceipt, nil, nil},
		{"ErrAckNonceOfDeliveryWithout", queue(6, 2, 1, 1), queueInput{item: inflight}, Request{Op: contract.OpQAck, Item: m, Delivery: 1, ReceiptNonce: nonce}, contract.EStaleReceipt, nil, nil},
		{"ErrAckUnknownItem", queue(6, 1, 1, 1), queueInput{}, Request{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrAckRequeued", queue(6, 1, 0, 1), queueInput{item: item(m, "ready", 1, nil, "")}, Request{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrAckRedelivered", queue(6, 1, 1, 1), queueInput{item: item(m, "inflight", 2, &later, "")}, Request{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrAckDone", queue(6, 0, 0, 1), queueInput{item: item(m, "done", 1, nil, "d")}, Request{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrAckEarlierQueue", queue(12, 1, 1, 10), queueInput{item: item(old, "inflight", 1, &later, "")}, Request{Op: contract.OpQAck, Item: old, Delivery: 1}, contract.EStaleReceipt, nil, nil},
		{"ErrAckMissingQueue", deleted, queueInput{item: inflight}, Request{Op: contract.OpQAck, Item: m, Delivery: 1}, contract.EStaleReceipt, nil, nil},

		{"OKRequeuePastDeadline", queue(6, 2, 1, 1), queueInput{item: inflight}, Request{Op: contract.OpQRequeue, Item: m, Delivery: 1},
			"", meta(2, 0, 1), item(m, "ready", 1, nil, "")},
		{"OKRequeueDropsNonce", queue(6, 2, 1, 1), queueInput{item: delivered}, Request{Op: contract.OpQRequeue, Item: m, Delivery: 1},
			"", meta(2, 0, 1), item(m, "ready", 1, nil, "")},
		{"ErrRequeueBeforeDeadline", queue(6, 2, 1, 1), queueInput{item: item(m, "inflight", 1, &later, "")}, Request{Op: contract.OpQRequeue, Item: m, Delivery: 1}, contract.EConflict, nil, nil},
		{"ErrRequeueAcked", queue(7, 1, 0, 1), queueInput{}, Request{Op: contract.OpQRequeue, Item: m, Delivery: 1}, contract.EConflict, nil, nil},
		{"ErrRequeueRedelivered", queue(8, 1, 1, 1), queueInput{item: item(m, "inflight", 2, &deadline, "")}, Request{Op: contract.OpQRequeue, Item: m, Delivery: 1}, contract.EConflict, nil, nil},
		{"ErrRequeueRequeuedAlready", queue(7, 1, 0, 1), queueInput{item: item(m, "ready", 1, nil, "")}, Request{Op: contract.OpQRequeue, Item: m, Delivery: 1}, contract.EConflict, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Principal = key, "p"
			d := DecideQueue(tc.cur, tc.in, requestMemory{}, &r, now, 1, testWindow, DefaultQueueDedupWindow)
			if tc.code != "" {
				if contract.ErrorCode(d.err) != tc.code || d.event != nil {
					t.Fatalf("error %v event %v, want %s and nothing appended", d.err, d.event, tc.code)
				}
				return
			}
			if d.err != nil {
				t.Fatal(d.err)
			}
			if tc.meta == nil {
				if d.event != nil || d.result.Changed || !d.result.Deduplicated || !reflect.DeepEqual(d.result.Element, tc.element) {
					t.Fatalf("decision %+v, want a deduplicated answer %+v appending nothing", d, tc.element)
				}
				return
			}
			if d.event == nil || d.event.Op != r.Op || d.event.Semantics.Purpose != "queue" || !d.result.Changed {
				t.Fatalf("event %+v, want one %s of a queue", d.event, r.Op)
			}
			got, err := contract.ParseCollectionMeta(d.event.After)
			if err != nil || got != *tc.meta {
				t.Fatalf("after %s (%v), want %+v", d.event.After, err, *tc.meta)
			}
			if !reflect.DeepEqual(d.event.Element, tc.element) {
				t.Fatalf("element %+v, want %+v", d.event.Element, tc.element)
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
	cur := contract.State{Version: 6, Live: true, Entry: contract.Entry{Key: key.String(), Version: 6, Value: meta, Semantics: contract.Semantics{Purpose: "queue"}}}
	m, old := projection.QueueMember(1, 0, 2), projection.QueueMember(0, 0, 1)
	later, past := now.Add(time.Minute), now.Add(-time.Second)
	const nonce = "0123456789abcdef0123456789abcdef"
	var messages []string
	for _, tc := range []struct {
		name string
		item *contract.Element
		req  Request
	}{
		{"NoItem", nil, Request{Item: m, Delivery: 1}},
		{"Acknowledged", &contract.Element{Member: m, State: contract.ItemDone}, Request{Item: m, Delivery: 1}},
		{"ExpiredDone", &contract.Element{Member: m, State: contract.ItemDone, DedupID: "d", ExpiresAt: &past}, Request{Item: m, Delivery: 1}},
		{"Requeued", &contract.Element{Member: m, State: contract.ItemReady, Deliveries: 1}, Request{Item: m, Delivery: 1}},
		{"Redelivered", &contract.Element{Member: m, State: contract.ItemInFlight, Deliveries: 2, VisibleAt: &later, ReceiptNonce: nonce}, Request{Item: m, Delivery: 1}},
		{"GuessedNonce", &contract.Element{Member: m, State: contract.ItemInFlight, Deliveries: 1, VisibleAt: &later, ReceiptNonce: nonce}, Request{Item: m, Delivery: 1}},
		{"EarlierQueue", &contract.Element{Member: old, State: contract.ItemInFlight, Deliveries: 1, VisibleAt: &later}, Request{Item: old, Delivery: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Op, r.Principal = key, contract.OpQAck, "p"
			d := DecideQueue(cur, queueInput{item: tc.item}, requestMemory{}, &r, now, 1, testWindow, DefaultQueueDedupWindow)
			var e *contract.Error
			if !errors.As(d.err, &e) || e.Code != contract.EStaleReceipt || e.Field != "receipt" || e.Current != nil || d.event != nil {
				t.Fatalf("%v, want stale_receipt on receipt without the entry, appending nothing", d.err)
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
	pop := &Request{Key: key, Op: contract.OpQPop, Visibility: 30, RequestID: "R", Principal: "p"}
	push := &Request{Key: key, Op: contract.OpQPush, Value: json.RawMessage(`"x"`), Priority: 4, RequestID: "P", Principal: "p"}
	after := func(r *Request, v int64) contract.State {
		return contract.State{Version: v, Live: true, RequestDigest: r.Digest(), Entry: contract.Entry{Key: key.String(), Version: v,
			Value: json.RawMessage(`{"type":"queue","size":2,"since":1,"inFlight":1}`), RequestID: r.RequestID, Semantics: contract.Semantics{Purpose: "queue"}}}
	}
	deadline := now.Add(20 * time.Second)
	popped := &contract.Element{Op: contract.ElementAdd, Member: projection.QueueMember(1, 0, 2), Value: json.RawMessage(`{"job":7}`),
		State: contract.ItemInFlight, Deliveries: 1, VisibleAt: &deadline, ReceiptNonce: "0123456789abcdef0123456789abcdef"}
	ref := projection.RequestRef{Key: key.String(), RequestID: "R"}
	d := DecideQueue(after(pop, 5), queueInput{}, requestMemory{ref: {Version: 5, Digest: pop.Digest(), Popped: popped}}, pop, now, 1, testWindow, DefaultQueueDedupWindow)
	a := QueuePopAnswer(d.result, pop)
	if d.event != nil || !d.result.Replayed || string(a.Data) != `{"job":7}` || a.Receipt != contract.Receipt(popped.Member, 1, popped.ReceiptNonce) ||
		a.Deadline == nil || !a.Deadline.Equal(deadline) || a.Size != 2 || a.Version != 5 {
		t.Fatalf("replayed pop: %+v %+v, want the popped item and receipt", d, a)
	}
	// The queue was written since (a push at 6): the retried pop still
	// answers its item, receipt and deadline, at the pop's version.
	older := requestMemory{ref: {Version: 5, Digest: pop.Digest(), Popped: popped, After: after(pop, 5).Entry.Value}}
	d = DecideQueue(after(push, 6), queueInput{}, older, pop, now, 1, testWindow, DefaultQueueDedupWindow)
	a = QueuePopAnswer(d.result, pop)
	if d.event != nil || d.err != nil || !d.result.Replayed || string(a.Data) != `{"job":7}` || a.Receipt != contract.Receipt(popped.Member, 1, popped.ReceiptNonce) ||
		a.Deadline == nil || !a.Deadline.Equal(deadline) || a.Size != 2 || a.Version != 5 {
		t.Fatalf("older pop retried: %+v %+v, want the popped item and receipt at version 5", d, a)
	}
	d = DecideQueue(after(pop, 6), queueInput{}, requestMemory{projection.RequestRef{Key: key.String(), RequestID: "P"}: {Version: 5, Digest: push.Digest()}}, push, now, 1, testWindow, DefaultQueueDedupWindow)
	if contract.ErrorCode(d.err) != contract.EConflict || d.event != nil {
		t.Fatalf("older push retried: %+v, want version_conflict", d)
	}
	d = DecideQueue(after(push, 6), queueInput{}, requestMemory{}, push, now, 1, testWindow, DefaultQueueDedupWindow)
	if pa := QueuePushAnswer(d.result, push); !d.result.Replayed || pa.Item != projection.QueueMember(1, 4, 6) || pa.Priority != 4 {
		t.Fatalf("replayed push: %+v %+v, want its item", d, pa)
	}
}

// TestQueueViewBatch: within one batch, a pop sees the items decided
// before it (so two pops take different items), the overlay's items
// shadow the projection's rows of the same member, and an item of an
// earlier incarnation is never a candidate.
func TestQueueViewBatch(t *testing.T) {
	q := "tenant/a/project/b/tasks"
	m := func(prio, v int64) string { return projection.QueueMember(5, prio, v) }
	v := newQueueView()
	v.overlay[q] = map[string]overlayItem{
		m(0, 9):                          {el: contract.Element{Member: m(0, 9), State: contract.ItemReady}},
		m(-1, 7):                         {el: contract.Element{Member: m(-1, 7), State: contract.ItemInFlight}}, // popped, unprojected
		projection.QueueMember(1, -9, 2): {el: contract.Element{Member: projection.QueueMember(1, -9, 2), State: contract.ItemReady}},
	}
	v.heads[q] = []contract.Element{{Member: m(-1, 7), State: contract.ItemReady}, {Member: m(0, 6), State: contract.ItemReady}}
	v.complete[q] = 5
	var order []string
	for range 3 {
		head, probe := v.firstReady(q, 5, time.Now())
		if head == nil {
			order = append(order, "none")
			if probe {
				t.Fatal("a complete head list asks for a probe")
			}
			continue
		}
		order = append(order, head.Member)
		el := *head
		el.State = contract.ItemInFlight
		v.batch[projection.ElementRef{Collection: q, Member: head.Member}] = el
	}
	if want := []string{m(0, 6), m(0, 9), "none"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("pops took %v, want %v", order, want)
	}
	if _, probe := newQueueView().firstReady(q, 5, time.Now()); !probe {
		t.Fatal("no heads known: want a probe")
	}
}

// TestTrimPrunesProjectedItems: a queue written without pause keeps its
// overlay entry (its latest event is not projected yet), but trim drops
// the items whose latest change the projection holds, replacing the map
// so a batch deciding on the one it read still sees it whole.
func TestTrimPrunesProjectedItems(t *testing.T) {
	w := offlineWriter(t, Config{Topics: changelog.Topics{Changes: "c", Conflicts: "x", Partitions: 1}})
	p := newPartition(w, 0)
	q := "tenant/a/project/b/tasks"
	var o overlayEntry
	for v := int64(1); v <= 3; v++ {
		o = o.next(&contract.Event{Key: q, Version: v, Kind: contract.KindPut, Op: contract.OpQPush,
			Element: &contract.Element{Op: contract.ElementAdd, Member: projection.QueueMember(1, 0, v), State: contract.ItemReady}}, 10+v, testWindow)
	}
	p.setReady(true, 1, map[string]overlayEntry{q: o})
	read := p.overlay[q].items // what a deciding batch holds
	p.trim(13)                 // the projector applied offsets 11 and 12
	e, ok := p.overlay[q]
	if !ok || len(e.items) != 1 || e.items[projection.QueueMember(1, 0, 3)].offset != 13 {
		t.Fatalf("after trim: entry %v items %+v, want only the unprojected item", ok, e.items)
	}
	if len(read) != 3 {
		t.Fatalf("the map a batch read changed: %+v", read)
	}
	p.trim(14)
	if _, ok := p.overlay[q]; ok {
		t.Fatal("the entry whose latest event is projected stays")
	}
}
