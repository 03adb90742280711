package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	"github.com/eskv/eskv/contract"
)

// Lists (docs/collections.md): a list is one key; its values are JSON.
// Every write gets a requestId when it has none, so a retry after a lost
// answer is never applied twice (a retried pop is answered as a replay
// with the value it popped, so the value of a lost answer is not lost).

// PushRequest pushes Value onto the list at Key.
type PushRequest struct {
	// Key is the list's key.
	Key string
	// Value is the JSON value pushed.
	Value json.RawMessage
	// ExpectedVersion, when set, is the version the list must have (0:
	// must not exist).
	ExpectedVersion *int64
	// TTL expires the whole list this long after the write; 0 keeps its
	// expiry.
	TTL time.Duration
	// RequestID makes the push idempotent; when empty the client gives
	// it one, so a retry after a lost answer never pushes twice.
	RequestID string
}

// ListChange is the answer of a list write: the value pushed or popped,
// the list's length and version after it (Value and Length are empty for
// a caller without the read right).
type ListChange = contract.ListChangeAnswer

// LPush prepends r.Value to the list at r.Key, creating the list.
func (c *Client) LPush(ctx context.Context, r PushRequest) (ListChange, error) {
	return c.push(ctx, contract.OpLPush, r)
}

// RPush appends r.Value to the list at r.Key, creating the list.
func (c *Client) RPush(ctx context.Context, r PushRequest) (ListChange, error) {
	return c.push(ctx, contract.OpRPush, r)
}

func (c *Client) push(ctx context.Context, op contract.Op, r PushRequest) (ListChange, error) {
	b := contract.PushBody{Value: r.Value, ExpectedVersion: r.ExpectedVersion, RequestID: orNewID(r.RequestID)}
	if r.TTL != 0 {
		ttl, err := ttlSeconds(r.TTL)
		if err != nil {
			return ListChange{}, err
		}
		b.TTLSeconds = ttl
	}
	if err := b.Validate(); err != nil {
		return ListChange{}, err
	}
	a, _, err := Call[ListChange](ctx, c, op, r.Key, &b)
	return a, err
}

// LPop removes and returns the first value of the list at key; an empty
// or missing list is contract.ENotFound.
func (c *Client) LPop(ctx context.Context, key string) (ListChange, error) {
	return c.pop(ctx, contract.OpLPop, key)
}

// RPop removes and returns the last value of the list at key.
func (c *Client) RPop(ctx context.Context, key string) (ListChange, error) {
	return c.pop(ctx, contract.OpRPop, key)
}

// LPopWait is LPop that the server holds up to wait (at most
// contract.MaxWait) while the list is empty, until a value arrives
// (waiters served in arrival order); across a writer's failover the
// client retries with what is left of it. When it ends first,
// contract.ENotFound.
func (c *Client) LPopWait(ctx context.Context, key string, wait time.Duration) (ListChange, error) {
	return c.popWait(ctx, contract.OpLPop, key, wait)
}

// RPopWait is RPop that waits as LPopWait.
func (c *Client) RPopWait(ctx context.Context, key string, wait time.Duration) (ListChange, error) {
	return c.popWait(ctx, contract.OpRPop, key, wait)
}

func (c *Client) pop(ctx context.Context, op contract.Op, key string) (ListChange, error) {
	return c.popWait(ctx, op, key, 0)
}

func (c *Client) popWait(ctx context.Context, op contract.Op, key string, wait time.Duration) (ListChange, error) {
	if wait > contract.MaxWait {
		return ListChange{}, contract.FieldErrorf(contract.EInvalid, contract.WaitParam, "wait %v is over %v", wait, contract.MaxWait)
	}
	b := contract.PopBody{RequestID: orNewID("")}
	a, _, err := callWait[ListChange](ctx, c, op, key, &b, wait)
	return a, err
}

// LTrim keeps the values of the list at key from index start to stop
// (inclusive, negative from the end, as Redis LTRIM).
func (c *Client) LTrim(ctx context.Context, key string, start, stop int64) (ListChange, error) {
	b := contract.TrimBody{Start: &start, Stop: &stop, RequestID: orNewID("")}
	a, _, err := Call[ListChange](ctx, c, contract.OpLTrim, key, &b)
	return a, err
}

// LRange returns the values of the list at key from index start to stop
// (inclusive, negative from the end, as Redis LRANGE): at most
// contract.MaxRange and the server's byte budget of a page, Truncated when
// the range held more (ask again from start+len(Values)).
func (c *Client) LRange(ctx context.Context, key string, start, stop int64) (contract.RangeAnswer, error) {
	q := url.Values{"start": {strconv.FormatInt(start, 10)}, "stop": {strconv.FormatInt(stop, 10)}}
	var a contract.RangeAnswer
	err := c.setRead(ctx, contract.OpLRange, key, q, &a)
	return a, err
}

// LLen returns the length of the list at key (0 for a missing list).
func (c *Client) LLen(ctx context.Context, key string) (int64, error) {
	var a contract.LenAnswer
	err := c.setRead(ctx, contract.OpLLen, key, nil, &a)
	return a.Length, err
}

// orNewID is id, or a new requestId when it is empty.
func orNewID(id string) string {
	if id == "" {
		return newRequestID()
	}
	return id
}
