package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	"github.com/eskv/eskv/contract"
)

// Queues (docs/collections.md "Queues"): a queue is one key; its items
// are JSON. Every write gets a requestId when it has none, so a retry
// after a lost answer is never applied twice (a retried pop is answered
// as a replay with the item and receipt it popped, so the item of a lost
// answer is not lost).

// Errors a queue call returns, for errors.Is: a pop of an empty or
// missing queue, and an ack of a receipt that is not the item's current
// delivery (acknowledged already, redelivered, returned to the queue).
var (
	ErrQueueEmpty   = contract.ErrQueueEmpty
	ErrStaleReceipt = contract.ErrStaleReceipt
)

// Answers of the queue calls.
type (
	QueuePush = contract.QPushAnswer
	QueuePop  = contract.QPopAnswer
	QueueAck  = contract.QAckAnswer
	QueueItem = contract.QueueItem
	QueueSize = contract.QSizeAnswer
)

// QPushRequest pushes Data onto the queue at Key.
type QPushRequest struct {
	// Key is the queue's key.
	Key string
	// Data is the item, any JSON value.
	Data json.RawMessage
	// Priority: lower is served first (-1e9 .. 1e9); FIFO within one.
	Priority int64
	// DedupID, when set, makes a push repeating it within the server's
	// dedup window add nothing (QueuePush.Deduplicated).
	DedupID string
	// ExpectedVersion, when set, is the version the queue must have (0:
	// must not exist).
	ExpectedVersion *int64
	// TTL expires the whole queue this long after the push; 0 keeps its
	// expiry.
	TTL time.Duration
	// ItemTTL, when positive (whole seconds), expires this item alone
	// this long after the push: it is never served after, and the
	// server's sweeper removes it. 0: the item never expires.
	ItemTTL time.Duration
	// RequestID makes the push idempotent; when empty the client gives
	// it one, so a retry after a lost answer never pushes twice.
	RequestID string
}

// QPush pushes r.Data onto the queue at r.Key, creating the queue.
func (c *Client) QPush(ctx context.Context, r QPushRequest) (QueuePush, error) {
	b := contract.QPushBody{Data: r.Data, Priority: r.Priority, DedupID: r.DedupID, ExpectedVersion: r.ExpectedVersion,
		RequestID: orNewID(r.RequestID)}
	if r.TTL != 0 {
		ttl, err := ttlSeconds(r.TTL)
		if err != nil {
			return QueuePush{}, err
		}
		b.TTLSeconds = ttl
	}
	if r.ItemTTL != 0 {
		if r.ItemTTL < 0 || r.ItemTTL%time.Second != 0 {
			return QueuePush{}, contract.FieldErrorf(contract.EInvalid, "itemTtlSeconds", "item TTL %v is not a positive whole number of seconds", r.ItemTTL)
		}
		n := int64(r.ItemTTL / time.Second)
		b.ItemTTLSeconds = &n
	}
	if err := b.Validate(); err != nil {
		return QueuePush{}, err
	}
	a, _, err := Call[QueuePush](ctx, c, contract.OpQPush, r.Key, &b)
	return a, err
}

// QPopRequest pops the next item of the queue at Key.
type QPopRequest struct {
	// Key is the queue's key.
	Key string
	// Visibility, when positive (whole seconds), hides the item for
	// this long instead of removing it: acknowledge it with QAck and
	// the answer's Receipt before the deadline, or it is delivered
	// again. 0 removes it at once.
	Visibility time.Duration
	// RequestID makes the pop idempotent; when empty the client gives
	// it one, so a retry after a lost answer never pops twice.
	RequestID string
	// Wait has the server hold the pop of an empty queue up to this long
	// (at most contract.MaxWait) until an item arrives (waiters served in
	// arrival order); across a writer's failover the client retries with
	// what is left of it. When it ends first, ErrQueueEmpty.
	Wait time.Duration
}

// QPop removes (or, with r.Visibility, hides) and returns the next item
// of the queue at r.Key: lowest priority first, FIFO within one. An empty
// or missing queue is ErrQueueEmpty.
func (c *Client) QPop(ctx context.Context, r QPopRequest) (QueuePop, error) {
	b := contract.QPopBody{RequestID: orNewID(r.RequestID)}
	if r.Visibility != 0 {
		if r.Visibility < 0 || r.Visibility%time.Second != 0 {
			return QueuePop{}, contract.FieldErrorf(contract.EInvalid, "visibilityTimeoutSeconds", "visibility %v is not a positive whole number of seconds", r.Visibility)
		}
		b.VisibilityTimeoutSeconds = int64(r.Visibility / time.Second)
	}
	if err := b.Validate(); err != nil {
		return QueuePop{}, err
	}
	if r.Wait > contract.MaxWait {
		return QueuePop{}, contract.FieldErrorf(contract.EInvalid, contract.WaitParam, "wait %v is over %v", r.Wait, contract.MaxWait)
	}
	a, _, err := callWait[QueuePop](ctx, c, contract.OpQPop, r.Key, &b, r.Wait)
	return a, err
}

// QAck acknowledges the delivery receipt names (a QPop answer's Receipt)
// of the queue at key: the item is removed. A receipt that is not the
// item's current delivery is ErrStaleReceipt (one message whatever the
// reason: it describes no delivery).
func (c *Client) QAck(ctx context.Context, key, receipt string) (QueueAck, error) {
	b := contract.QAckBody{Receipt: receipt, RequestID: orNewID("")}
	if err := b.Validate(); err != nil {
		return QueueAck{}, err
	}
	a, _, err := Call[QueueAck](ctx, c, contract.OpQAck, key, &b)
	return a, err
}

// QPeek returns the next count ready items of the queue at key (1 ..
// contract.MaxPeek) in serving order, removing nothing: fewer when their
// bytes pass the server's byte budget of a page (but always one).
func (c *Client) QPeek(ctx context.Context, key string, count int) ([]QueueItem, error) {
	a, err := c.QPeekPage(ctx, key, count)
	return a.Items, err
}

// QPeekPage is QPeek's whole answer: the items, whether the server's
// page budget cut them short, and the log position they reflect.
func (c *Client) QPeekPage(ctx context.Context, key string, count int) (contract.QPeekAnswer, error) {
	var a contract.QPeekAnswer
	err := c.setRead(ctx, contract.OpQPeek, key, url.Values{"count": {strconv.Itoa(count)}}, &a)
	return a, err
}

// QSize returns the size of the queue at key (items pushed and not yet
// removed or acknowledged) and how many of them are in flight; 0 for a
// missing queue.
func (c *Client) QSize(ctx context.Context, key string) (QueueSize, error) {
	var a QueueSize
	err := c.setRead(ctx, contract.OpQSize, key, nil, &a)
	return a, err
}
