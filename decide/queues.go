package decide

import (
	"crypto/subtle"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/elemkey"
	"github.com/eskv/eskv/projection/keystate"
)

// Queues (docs/collections.md "Queues", events/queue.go). A queue's
// metadata holds its size, since and in-flight count; each item is one
// kv_elements row (member elemkey.QueueMember: incarnation, priority,
// push version). Every queue write is decided on the metadata and at
// most one item: a push on the item with its dedupId (if any), a pop on
// the queue's first ready item, an ack or the sweeper's requeue on the
// item its receipt names. Each appends one event carrying the item's
// full new state (contract.Element.State ...), or nothing.

// DefaultQueueDedupWindow is writer.Config.QueueDedupWindow's default: a push
// repeating the dedupId of one made this recently adds nothing (as SQS
// FIFO queues' 5 minutes).
const DefaultQueueDedupWindow = 5 * time.Minute

// QueueInput is what a queue write is decided on besides the queue's
// state: for a pop, the queue's first ready item (nil: none known) and
// the random nonce of the receipt of the delivery it makes
// (the writer draws it: decideQueue stays pure); for an ack or a requeue,
// the item its receipt names (nil: no row); for a push with a dedupId,
// the newest item pushed with it (nil: none).
type QueueInput struct {
	Head, Item, Dup *contract.Element
	Nonce           string
}

// QueueMeta reads a queue's metadata from its entry as a read sees it
// (nil: absent, an empty queue).
func QueueMeta(visible *contract.Entry) (contract.CollectionMeta, *contract.Error) {
	return collectionMeta(visible, contract.PurposeQueue)
}

// InIncarnation reports whether member is an item of the queue
// incarnation since (an item of an earlier one, deleted or expired since,
// is no item).
func InIncarnation(member string, since int64) bool {
	from, to := elemkey.QueueRange(since)
	return member >= from && member < to
}

// decideQueue decides a queue write c (qpush, qpop, qack, qrequeue) on
// the queue's state (in.State), its items (in.Queue) and what in.Known
// holds of c's requestId. It is pure. The first push creates the queue (since = its
// version); a pop of an empty or missing queue is 404 queue_empty and
// appends nothing; a push whose dedupId was pushed within env.DedupWindow
// appends nothing (Result.Deduplicated).
func decideQueue(c *Queue, in Input, env Env) Decision {
	w := newWrite(in.State, c.common(), &env)
	d, done := decideCollectionRequest(w, in.Known)
	if done {
		if d.Result.Replayed && d.Result.Element == nil {
			d.Result.Element = replayedQueueWrite(in.State, in.Known, c)
		}
		return d
	}
	visible, q, now := w.visible, in.Queue, env.Now
	meta, err := QueueMeta(visible)
	if err != nil {
		return Decision{Err: err}
	}
	ev := newEvent(w)
	ev.Op = c.Op
	if visible == nil {
		meta.Since = ev.Version
	}
	var (
		el   *contract.Element
		werr error
	)
	switch c.Op {
	case contract.OpQPush:
		if dup := duplicate(q.Dup, visible, meta, c, env); dup != nil {
			return Decision{Result: Result{Entry: *visible, Element: dup, Deduplicated: true}}
		}
		el = pushed(meta, c, ev.Version, now)
		meta.Size++
	case contract.OpQPop:
		el, werr = decidePop(q.Head, visible, &meta, c, now)
		if el != nil && el.State == ItemInFlight {
			el.ReceiptNonce = q.Nonce // only a delivery in flight is acknowledged
		}
	case contract.OpQAck:
		el, werr = decideAck(q.Item, visible, &meta, c)
	case contract.OpQRequeue:
		el, werr = decideRequeue(q.Item, visible, &meta, c, now)
	case contract.OpQExpire:
		el, werr = decideExpireItem(q.Item, visible, &meta, c, now)
	default:
		werr = contract.Errorf(contract.EInternal, "%s is not a queue write", c.Op)
	}
	if werr != nil {
		return Decision{Err: werr}
	}
	after, merr := marshalCompact(meta)
	if merr != nil {
		return Decision{Err: contract.Errorf(contract.EInternal, "encode queue metadata: %v", merr)}
	}
	ev.After, ev.Element = after, el
	d = finish(w, ev, contract.PurposeQueue, c.TTLSeconds == 0)
	d.Result.Changed = true
	d.Result.Element = el
	return d
}

// pushed is the item a push of c appends at version: ready, and with an
// item TTL its own expiry (pushedAt + TTL), which every later event of
// the item carries.
func pushed(meta contract.CollectionMeta, c *Queue, version int64, now time.Time) *contract.Element {
	el := &contract.Element{Op: contract.ElementAdd, Member: elemkey.QueueMember(meta.Since, c.Priority, version),
		Value: c.Value, State: ItemReady, DedupID: c.DedupID, PushedAt: &now}
	if c.ItemTTL > 0 {
		exp := now.Add(time.Duration(c.ItemTTL) * time.Second)
		el.ExpiresAt = &exp
	}
	return el
}

// duplicate is the item a push of c.DedupID repeats: dup, when it is an
// item of this incarnation of the queue pushed within the window.
func duplicate(dup *contract.Element, visible *contract.Entry, meta contract.CollectionMeta, c *Queue, env Env) *contract.Element {
	now, window := env.Now, env.DedupWindow
	if c.DedupID == "" || dup == nil || visible == nil || dup.DedupID != c.DedupID || !InIncarnation(dup.Member, meta.Since) {
		return nil
	}
	if dup.PushedAt == nil || now.Sub(*dup.PushedAt) >= window {
		return nil
	}
	el := *dup
	return &el
}

// decidePop takes head, the queue's first ready item: with a visibility
// timeout it goes in flight (one more delivery, hidden until its
// deadline); without, it is removed (kept as done when it has a dedupId,
// so repeated pushes within the window still find it).
func decidePop(head *contract.Element, visible *contract.Entry, meta *contract.CollectionMeta, c *Queue, now time.Time) (*contract.Element, error) {
	if visible == nil || meta.Size-meta.InFlight <= 0 {
		return nil, contract.FieldErrorf(contract.EQueueEmpty, "key", "queue %s is empty or does not exist", c.Key)
	}
	if head == nil || ItemExpired(head, now) {
		// The metadata counts ready items whose own TTL passed until
		// the sweeper's qexpire removes them (at most one sweep
		// interval after): they are never served, so a queue holding
		// only those is empty.
		return nil, contract.FieldErrorf(contract.EQueueEmpty, "key", "queue %s has no item to serve: its %d ready items have expired (items past their itemTtlSeconds wait for the sweeper's removal)", c.Key, meta.Size-meta.InFlight)
	}
	if head.State != ItemReady || !InIncarnation(head.Member, meta.Since) {
		// Never answer a wrong item.
		return nil, contract.Errorf(contract.EInternal, "queue %s: the next item %s is not a ready item of this queue", c.Key, head.Member)
	}
	el := *head
	el.Deliveries++
	el.VisibleAt = nil
	switch {
	case c.Visibility > 0:
		deadline := now.Add(time.Duration(c.Visibility) * time.Second)
		el.State, el.VisibleAt = ItemInFlight, &deadline
		meta.InFlight++
	case el.DedupID != "":
		el.State = ItemDone
		meta.Size--
	default:
		el.Op, el.State = contract.ElementRemove, ""
		meta.Size--
	}
	return &el, nil
}

// errStaleReceipt answers an ack of a receipt that is not the current
// delivery of a live item. Its message is the same whatever the reason
// (acknowledged, requeued, redelivered, expired, removed, never handed
// out, or a nonce that does not match): it describes no item's state or
// deliveries to whoever holds the receipt, which may be a guess.
var errStaleReceipt = contract.FieldErrorf(contract.EStaleReceipt, "receipt",
	"stale receipt: it is not the current delivery of an item in flight in this queue (acknowledged already, returned to the queue after its visibility timeout and maybe redelivered, expired, removed, or never handed out)")

// current reports whether item is the in-flight delivery c names, in
// this incarnation of the queue.
func current(item *contract.Element, visible *contract.Entry, meta contract.CollectionMeta, c *Queue) bool {
	return visible != nil && item != nil && item.Member == c.Item && InIncarnation(item.Member, meta.Since) &&
		item.State == ItemInFlight && item.Deliveries == c.Delivery
}

// receiptMatches reports whether nonce, an ack's, is the nonce of
// item's delivery, compared in constant time. A delivery popped before
// receipts had a nonce (none stored: an item in flight across the
// upgrade, or popped by a writer not yet upgraded) takes its receipt
// without one, <item>#<delivery>, until that delivery ends (at most
// contract.MaxVisibilitySeconds); any delivery popped since needs its
// nonce.
func receiptMatches(item *contract.Element, nonce string) bool {
	return subtle.ConstantTimeCompare([]byte(item.ReceiptNonce), []byte(nonce)) == 1
}

// decideAck removes the in-flight item c's receipt names (done when it
// has a dedupId); anything else is a stale receipt, and a redelivered
// item is never removed by an earlier delivery's receipt. An ack after
// the deadline but before the sweeper requeued the item succeeds, as in
// SQS; so does one after the item's own TTL passed but before the
// sweeper's qexpire removed it (then it is stale).
func decideAck(item *contract.Element, visible *contract.Entry, meta *contract.CollectionMeta, c *Queue) (*contract.Element, error) {
	if !current(item, visible, *meta, c) || !receiptMatches(item, c.ReceiptNonce) {
		return nil, errStaleReceipt
	}
	el := *item
	el.VisibleAt, el.ReceiptNonce = nil, ""
	if el.DedupID != "" {
		el.State = ItemDone
	} else {
		el.Op, el.State = contract.ElementRemove, ""
	}
	meta.Size--
	meta.InFlight--
	return &el, nil
}

// decideRequeue returns the in-flight item c names to the queue when its
// deadline passed: ready again, its deliveries kept. An ack or a requeue
// that won the race leaves nothing to do (version_conflict, which the
// sweeper counts as skipped). An item whose own TTL passed is not
// returned: the sweeper's qexpire removes it.
func decideRequeue(item *contract.Element, visible *contract.Entry, meta *contract.CollectionMeta, c *Queue, now time.Time) (*contract.Element, error) {
	if !current(item, visible, *meta, c) || item.VisibleAt == nil || now.Before(*item.VisibleAt) || ItemExpired(item, now) {
		return nil, contract.Errorf(contract.EConflict, "queue %s: item %s delivery %d is no longer in flight past its deadline", c.Key, c.Item, c.Delivery)
	}
	el := *item
	el.State, el.VisibleAt, el.ReceiptNonce = ItemReady, nil, ""
	meta.InFlight--
	return &el, nil
}

// decideExpireItem removes the item c names when its own TTL passed and
// it is still ready or in flight (any delivery: the TTL is the item's,
// not a delivery's): its row is deleted, or kept done when it has a
// dedupId so repeated pushes within the window still find it; size-1,
// and inFlight-1 when it was in flight. A pop, ack or expire that won
// the race leaves nothing to do (version_conflict: skipped).
func decideExpireItem(item *contract.Element, visible *contract.Entry, meta *contract.CollectionMeta, c *Queue, now time.Time) (*contract.Element, error) {
	live := visible != nil && item != nil && item.Member == c.Item && InIncarnation(item.Member, meta.Since) &&
		(item.State == ItemReady || item.State == ItemInFlight)
	if !live || !ItemExpired(item, now) {
		return nil, contract.Errorf(contract.EConflict, "queue %s: item %s is no longer a ready or in-flight item past its TTL", c.Key, c.Item)
	}
	el := *item
	if el.State == ItemInFlight {
		meta.InFlight--
	}
	el.VisibleAt, el.ReceiptNonce = nil, ""
	if el.DedupID != "" {
		el.State = ItemDone
	} else {
		el.Op, el.State = contract.ElementRemove, ""
	}
	meta.Size--
	return &el, nil
}

// replayedQueueWrite is the element a replay of c (the queue's latest
// write, at cur) answers: a pop's item as it popped it (replayedPop),
// a push's item id.
func replayedQueueWrite(cur keystate.State, known Memory, c *Queue) *contract.Element {
	if c.Op == contract.OpQPush {
		meta, err := contract.ParseCollectionMeta(cur.Entry.Value)
		if err != nil {
			return nil
		}
		return &contract.Element{Op: contract.ElementAdd, Member: elemkey.QueueMember(meta.Since, c.Priority, cur.Version)}
	}
	return replayedPop(cur, known, &c.Header)
}

// QueuePushAnswer is the answer of a qpush from its result.
func QueuePushAnswer(res Result, r *Queue) contract.QPushAnswer {
	a := contract.QPushAnswer{Queue: res.Entry.Key, Version: res.Entry.Version, Priority: r.Priority, Deduplicated: res.Deduplicated}
	a.Size, _ = queueSizes(res.Entry)
	if res.Element != nil {
		a.Item = res.Element.Member
		if _, prio, _, err := elemkey.ParseQueueMember(a.Item); err == nil {
			a.Priority = prio
		}
	}
	return a
}

// QueuePopAnswer is the answer of a qpop from its result.
func QueuePopAnswer(res Result, r *Queue) contract.QPopAnswer {
	a := contract.QPopAnswer{Queue: res.Entry.Key, Version: res.Entry.Version}
	a.Size, _ = queueSizes(res.Entry)
	if el := res.Element; el != nil {
		a.Data, a.Item, a.Deliveries, a.ExpiresAt = el.Value, el.Member, el.Deliveries, el.ExpiresAt
		a.Receipt = contract.Receipt(el.Member, el.Deliveries, el.ReceiptNonce)
		if _, prio, _, err := elemkey.ParseQueueMember(el.Member); err == nil {
			a.Priority = prio
		}
		if el.VisibleAt != nil && el.State == ItemInFlight {
			a.Deadline = el.VisibleAt
			a.VisibilityTimeout = r.Visibility
		}
	}
	return a
}

// QueueAckAnswer is the answer of a qack from its result.
func QueueAckAnswer(res Result) contract.QAckAnswer {
	a := contract.QAckAnswer{Queue: res.Entry.Key, Acked: true, Version: res.Entry.Version}
	a.Size, _ = queueSizes(res.Entry)
	return a
}

// queueSizes are the size and in-flight count of a queue entry (0 when
// it holds no queue metadata).
func queueSizes(e contract.Entry) (size, inFlight int64) {
	if e.Value == nil {
		return 0, 0
	}
	meta, err := contract.ParseCollectionMeta(e.Value)
	if err != nil {
		return 0, 0
	}
	return meta.Size, meta.InFlight
}

// ReadQueueSize answers qsize from the queue's entry as a read sees it:
// 0 for an absent queue.
func ReadQueueSize(key contract.Key, e *contract.Entry) (contract.QSizeAnswer, error) {
	meta, err := QueueMeta(e)
	if err != nil {
		return contract.QSizeAnswer{}, err
	}
	return contract.QSizeAnswer{Queue: key.String(), Size: meta.Size, InFlight: meta.InFlight}, nil
}

// QueueItemRef names the item an ack, a requeue or an expire c decides
// on; ok is false for every other command.
func QueueItemRef(c Command) (ElementRef, bool) {
	q, ok := c.(*Queue)
	if !ok {
		return ElementRef{}, false
	}
	if q.Op != contract.OpQAck && q.Op != contract.OpQRequeue && q.Op != contract.OpQExpire {
		return ElementRef{}, false
	}
	return ElementRef{Collection: q.Key.String(), Member: q.Item}, true
}

// common is what the rules every single-key family shares read of c: a
// push attempts its data; a queue write gives no semantics.
func (c *Queue) common() common {
	cm := common{Header: &c.Header, ExpectedVersion: c.ExpectedVersion, TTLSeconds: c.TTLSeconds, Attempted: c.Value, ConflictOp: c.Op}
	if c.RequestID != "" {
		cm.Digest = c.digest()
	}
	return cm
}

// digest is c's request digest (requestid.go): a collection write's
// parts, then the queue's (a push's priority and dedupId, a pop's
// visibility, an ack's item and delivery), a push's item TTL and an
// ack's receipt nonce.
func (c *Queue) digest() string {
	parts := collectionParts(&c.Header, c.Value, c.ExpectedVersion, c.TTLSeconds)
	if c.Op.IsQueueWrite() {
		parts = append(parts, "queue", c.Priority, c.DedupID, c.Visibility, c.Item, c.Delivery)
	}
	if c.ItemTTL != 0 { // only then: older digests keep their parts
		parts = append(parts, "itemTtl", c.ItemTTL)
	}
	if c.ReceiptNonce != "" { // only then: older digests keep their parts
		parts = append(parts, "nonce", c.ReceiptNonce)
	}
	return digestSum(parts)
}

// States of a queue item (Element.State); absent: the row is deleted.
const (
	ItemReady    = "ready"    // served by the next pop, in order
	ItemInFlight = "inflight" // popped with a visibility timeout, not acknowledged yet
	ItemDone     = "done"     // removed, kept only for its dedupId's window; never served
)

// ItemExpired reports whether queue item e's own TTL has passed at now:
// it is never served then, and the sweeper removes it.
func ItemExpired(e *contract.Element, now time.Time) bool {
	return e.ExpiresAt != nil && !now.Before(*e.ExpiresAt)
}
