package api

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/elemkey"
)

// Queues (docs/collections.md "Queues", events/queue.go): items are JSON,
// pushed in the body of :qpush; :qpop answers the next ready item and,
// with a visibility timeout, a receipt that :qack acknowledges.

// qpush serves POST /v1/kv/{key}:qpush. A caller with only the write
// right learns its item's id but not the queue's size, nor, when its
// push was deduplicated, the earlier push's item.
func (s *Server) qpush(c echo.Context, op contract.Op, p *Principal, k contract.Key) error {
	var b contract.QPushBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	data, err := codec.CompactValue(b.Data, s.cfg.MaxValueBytes)
	if err != nil {
		return err
	}
	var ttl int64
	if b.TTLSeconds != nil {
		ttl = *b.TTLSeconds
	}
	req := &decide.Queue{Header: decide.Header{Key: k, Op: op, RequestID: b.RequestID, Principal: p.Name}, Value: data, Priority: b.Priority,
		DedupID: b.DedupID, ExpectedVersion: b.ExpectedVersion, TTLSeconds: ttl}
	if b.ItemTTLSeconds != nil {
		req.ItemTTL = *b.ItemTTLSeconds
	}
	res, err := s.write(c, req)
	if err != nil {
		return err
	}
	res.Entry.Key = k.String()
	a := decide.QueuePushAnswer(res, req)
	if !mayRead(c, k.String()) {
		a.Size = 0
		if a.Deduplicated {
			// The earlier push's item (its priority, its version) is
			// another push's: the caller learns only that its own
			// push added nothing.
			a.Item, a.Priority = "", req.Priority
		}
	}
	return c.JSON(http.StatusOK, a)
}

// needsRead refuses a queue write that answers items (pop) or sizes to
// a caller without the read right: a pop that could not answer its item
// would lose it.
func needsRead(c echo.Context, p *Principal, k contract.Key, op contract.Op) error {
	if mayRead(c, k.String()) {
		return nil
	}
	return contract.FieldErrorf(contract.EForbidden, "key", "principal %s may not read %s: %s answers the item, so it needs the read right as well as the write right", p.Name, k, op)
}

// qpop serves POST /v1/kv/{key}:qpop?wait=; the body is optional. An
// empty or missing queue is 404 queue_empty (after the wait, waits.go).
func (s *Server) qpop(c echo.Context, op contract.Op, p *Principal, k contract.Key) error {
	if err := needsRead(c, p, k, op); err != nil {
		return err
	}
	var b contract.QPopBody
	if err := s.decodeOptional(c, &b); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	req := &decide.Queue{Header: decide.Header{Key: k, Op: op, RequestID: b.RequestID, Principal: p.Name},
		Visibility: b.VisibilityTimeoutSeconds, ExpectedVersion: b.ExpectedVersion}
	res, err := s.writeWait(c, req)
	if err != nil {
		return err
	}
	res.Entry.Key = k.String()
	return c.JSON(http.StatusOK, decide.QueuePopAnswer(res, req))
}

// qack serves POST /v1/kv/{key}:qack: a stale receipt is 409
// stale_receipt, one message whatever the reason. The write right is
// enough: a receipt is random (contract.Receipt), so only the consumer a
// pop answered, or whoever it handed the receipt to, can ack it.
func (s *Server) qack(c echo.Context, op contract.Op, p *Principal, k contract.Key) error {
	var b contract.QAckBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	member, delivery, nonce, _ := contract.ParseReceipt(b.Receipt)
	req := &decide.Queue{Header: decide.Header{Key: k, Op: op, RequestID: b.RequestID, Principal: p.Name}, Item: member, Delivery: delivery, ReceiptNonce: nonce}
	res, err := s.write(c, req)
	if err != nil {
		return err
	}
	res.Entry.Key = k.String()
	a := decide.QueueAckAnswer(res)
	if !mayRead(c, k.String()) {
		a.Size = 0
	}
	return c.JSON(http.StatusOK, a)
}

// qpeek serves GET /v1/kv/{key}:qpeek?count=: the next count ready items
// (default 1, at most contract.MaxPeek, no more than fit in MaxListBytes
// but at least one: truncated) in serving order, read-only and
// linearizable like lrange (the owner waits until the projection holds
// every change of the queue it acknowledged, then one snapshot reads the
// metadata and one range of the ready index).
func (s *Server) qpeek(c echo.Context, _ contract.Op, k contract.Key) error {
	count := 1
	if v, ok := c.QueryParams()["count"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > contract.MaxPeek {
			return contract.FieldErrorf(contract.EInvalid, "count", "count must be an integer from 1 to %d", contract.MaxPeek)
		}
		count = n
	}
	ctx := c.Request().Context()
	st, err := s.w.State(ctx, k)
	if err != nil {
		return err
	}
	if _, err := decide.ReadQueueSize(k, st.Visible(s.now())); err != nil {
		return err // not a queue
	}
	where, err := s.w.AwaitProjected(ctx, k.String())
	if err != nil {
		return err
	}
	release, err := s.takeList(c) // a page in memory until it is answered
	if err != nil {
		return err
	}
	defer release()
	ctx = c.Request().Context() // names the reader (takeList)
	var items []contract.Element
	var truncated bool
	at, err := s.readProjected(ctx, where, func(l Lister) (err error) {
		items, truncated, err = l.Peek(ctx, k.String(), count, s.cfg.MaxListBytes, s.now())
		return err
	})
	if err != nil {
		return err
	}
	setPosition(c, at)
	a := contract.QPeekAnswer{Queue: k.String(), Items: make([]contract.QueueItem, 0, len(items)), Truncated: truncated, Position: positionText(at)}
	for _, el := range items {
		it := contract.QueueItem{Item: el.Member, Data: el.Value, Deliveries: el.Deliveries, ExpiresAt: el.ExpiresAt}
		if _, prio, _, err := elemkey.ParseQueueMember(el.Member); err == nil {
			it.Priority = prio
		}
		a.Items = append(a.Items, it)
	}
	return c.JSON(http.StatusOK, a)
}
