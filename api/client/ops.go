package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/eskv/eskv/events"
)

// IncrementRequest adds to a counter: a key whose value is a JSON integer.
type IncrementRequest struct {
	Key string
	// By is the amount to add; negative decrements; 0 means 1.
	By int64
	// Create starts a missing (or expired, or deleted) key from 0;
	// without it a missing key is events.ENotFound.
	Create bool
	// ExpectedVersion, when set, makes the increment a compare-and-swap.
	ExpectedVersion *int64
	// TTL, when set, expires the counter this long after the increment;
	// 0 keeps its current expiry.
	TTL time.Duration
	// Semantics, when set, replace the entry's; a new counter gets
	// purpose "counter".
	Semantics events.Semantics
	// RequestID makes the increment idempotent (and retried): repeating
	// it does not add twice.
	RequestID string
	SpecRef   string
}

// incrementBody is the wire form of IncrementRequest (api.IncrementBody).
type incrementBody struct {
	By              *int64            `json:"by,omitempty"`
	Create          bool              `json:"create,omitempty"`
	ExpectedVersion *int64            `json:"expectedVersion,omitempty"`
	TTLSeconds      *int64            `json:"ttlSeconds,omitempty"`
	Semantics       *events.Semantics `json:"semantics,omitempty"`
	RequestID       string            `json:"requestId,omitempty"`
	SpecRef         string            `json:"specRef,omitempty"`
}

// Counter is a counter after an increment.
type Counter struct {
	// Value is the counter's new value.
	Value int64
	// Entry is the key's entry after the increment.
	Entry events.Entry
	// Replayed is true when the request repeated the key's last write.
	Replayed bool
}

// Increment adds r.By (default 1) to the integer at r.Key atomically and
// returns the new value. A key that holds anything but an integer is
// events.EWrongType; leaving the int64 range is events.EOutOfRange.
func (c *Client) Increment(ctx context.Context, r IncrementRequest) (Counter, error) {
	b := incrementBody{Create: r.Create, ExpectedVersion: r.ExpectedVersion, RequestID: r.RequestID, SpecRef: r.SpecRef}
	if r.By != 0 {
		b.By = &r.By
	}
	ttl, err := ttlSeconds(r.TTL)
	if err != nil {
		return Counter{}, err
	}
	b.TTLSeconds = ttl
	if !isZero(r.Semantics) {
		b.Semantics = &r.Semantics
	}
	var out Counter
	h, err := c.verb(ctx, r.Key, "increment", b, r.RequestID != "", &out.Entry)
	if err != nil {
		return Counter{}, err
	}
	if err := json.Unmarshal(out.Entry.Value, &out.Value); err != nil {
		return Counter{}, events.Errorf(events.EInternal, "counter %s answered %s: %v", r.Key, out.Entry.Value, err)
	}
	out.Replayed = h.Get("Eskv-Replayed") == "true"
	return out, nil
}

// Decrement subtracts by (default 1) from the counter at key; see
// Increment.
func (c *Client) Decrement(ctx context.Context, key string, by int64, create bool) (Counter, error) {
	if by == 0 {
		by = 1
	}
	return c.Increment(ctx, IncrementRequest{Key: key, By: -by, Create: create})
}

// ttlSeconds converts an optional TTL to its wire form.
func ttlSeconds(d time.Duration) (*int64, error) {
	if d == 0 {
		return nil, nil
	}
	if d < 0 || d%time.Second != 0 {
		return nil, events.FieldErrorf(events.EInvalid, "ttlSeconds", "TTL %v is not a positive whole number of seconds", d)
	}
	n := int64(d / time.Second)
	return &n, nil
}

// LockRequest takes part in a lock or a leader pool.
type LockRequest struct {
	Key string
	// Holder identifies the caller (a host/pid, a pod name, a UUID): only
	// the holder may extend or release.
	Holder string
	// TTL is the lease (default 60 s on the server); ignored by release.
	TTL time.Duration
	// Semantics may name a producer and consumer hints; the purpose is
	// always "lock" or "leader".
	Semantics events.Semantics
	// RequestID makes the call idempotent (and retried).
	RequestID string
	SpecRef   string
}

// lockBody is the wire form of LockRequest (api.LockBody).
type lockBody struct {
	Holder     string            `json:"holder"`
	TTLSeconds *int64            `json:"ttlSeconds,omitempty"`
	Semantics  *events.Semantics `json:"semantics,omitempty"`
	RequestID  string            `json:"requestId,omitempty"`
	SpecRef    string            `json:"specRef,omitempty"`
}

// Lock is a held lock or leadership (api.LockAnswer).
type Lock struct {
	Key    string `json:"key"`
	Holder string `json:"holder"`
	// Token is the fencing token: pass it to the resources the lock
	// protects and have them refuse any token lower than the highest they
	// have seen. It is the same for one holder's whole tenure (re-entry
	// and extends keep it) and grows strictly from tenure to tenure.
	Token      int64      `json:"token"`
	Version    int64      `json:"version"`
	AcquiredAt time.Time  `json:"acquiredAt"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	// Reentered is true when Holder already held it.
	Reentered bool `json:"reentered"`
	// Replayed is true when the request repeated the key's last write.
	Replayed bool `json:"-"`
}

// ReleaseResult is the answer of ReleaseLock and Resign (api.ReleaseAnswer).
type ReleaseResult struct {
	Key      string `json:"key"`
	Version  int64  `json:"version"`
	Released bool   `json:"released"`
	Replayed bool   `json:"-"`
}

// AcquireLock takes the lock at r.Key for r.Holder without waiting. A lock
// held by another holder is events.ELockHeld, with Current holding the
// lock's entry (its value names the holder; ExpiresAt the lease's end).
func (c *Client) AcquireLock(ctx context.Context, r LockRequest) (Lock, error) {
	return c.lockCall(ctx, r, "acquire")
}

// ExtendLock renews the lease of a lock r.Holder holds; otherwise
// events.ENotLockHolder.
func (c *Client) ExtendLock(ctx context.Context, r LockRequest) (Lock, error) {
	return c.lockCall(ctx, r, "extend")
}

// ReleaseLock frees a lock r.Holder holds; otherwise events.ENotLockHolder.
func (c *Client) ReleaseLock(ctx context.Context, r LockRequest) (ReleaseResult, error) {
	return c.releaseCall(ctx, r, "release")
}

// CheckLock returns the lock's holder; a free lock is events.ENotFound.
func (c *Client) CheckLock(ctx context.Context, key string) (Lock, error) {
	return c.check(ctx, key, "lock")
}

// Elect makes r.Holder the leader of the pool at r.Key if it has none, or
// renews r.Holder's leadership. Another leader is events.ENotLeader, with
// Current holding the leadership's entry.
func (c *Client) Elect(ctx context.Context, r LockRequest) (Lock, error) {
	return c.lockCall(ctx, r, "elect")
}

// Heartbeat renews r.Holder's leadership; otherwise events.ENotLeader.
func (c *Client) Heartbeat(ctx context.Context, r LockRequest) (Lock, error) {
	return c.lockCall(ctx, r, "heartbeat")
}

// Resign ends r.Holder's leadership; otherwise events.ENotLeader.
func (c *Client) Resign(ctx context.Context, r LockRequest) (ReleaseResult, error) {
	return c.releaseCall(ctx, r, "resign")
}

// Leader returns the pool's leader; a pool without one is
// events.ENotFound.
func (c *Client) Leader(ctx context.Context, key string) (Lock, error) {
	return c.check(ctx, key, "leader")
}

func (c *Client) lockCall(ctx context.Context, r LockRequest, verb string) (Lock, error) {
	b, err := lockWire(r)
	if err != nil {
		return Lock{}, err
	}
	var l Lock
	h, err := c.verb(ctx, r.Key, verb, b, r.RequestID != "", &l)
	if err != nil {
		return Lock{}, err
	}
	l.Replayed = h.Get("Eskv-Replayed") == "true"
	return l, nil
}

func (c *Client) releaseCall(ctx context.Context, r LockRequest, verb string) (ReleaseResult, error) {
	r.TTL = 0
	b, err := lockWire(r)
	if err != nil {
		return ReleaseResult{}, err
	}
	b.Semantics = nil
	var res ReleaseResult
	h, err := c.verb(ctx, r.Key, verb, b, r.RequestID != "", &res)
	if err != nil {
		return ReleaseResult{}, err
	}
	res.Replayed = h.Get("Eskv-Replayed") == "true"
	return res, nil
}

func lockWire(r LockRequest) (lockBody, error) {
	b := lockBody{Holder: r.Holder, RequestID: r.RequestID, SpecRef: r.SpecRef}
	ttl, err := ttlSeconds(r.TTL)
	if err != nil {
		return b, err
	}
	b.TTLSeconds = ttl
	if !isZero(r.Semantics) {
		b.Semantics = &r.Semantics
	}
	return b, nil
}

func (c *Client) check(ctx context.Context, key, verb string) (Lock, error) {
	p, err := keyPath(key)
	if err != nil {
		return Lock{}, err
	}
	var l Lock
	_, err = c.do(ctx, call{method: http.MethodGet, path: p + ":" + verb, key: key, retry: true}, &l)
	return l, err
}

// verb sends POST /v1/kv/{key}:{verb} with body b.
func (c *Client) verb(ctx context.Context, key, verb string, b any, retry bool, out any) (http.Header, error) {
	p, err := keyPath(key)
	if err != nil {
		return nil, err
	}
	body, err := marshal(b)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, call{method: http.MethodPost, path: p + ":" + verb, body: body, key: key, retry: retry}, out)
}

// PatchRequest changes top-level fields of an object value without a
// read-modify-write.
type PatchRequest struct {
	Key string
	// Set gives fields their new JSON values (json.RawMessage("null")
	// stores null); Unset removes fields.
	Set   map[string]json.RawMessage
	Unset []string
	// If, when set, applies the patch only while the field equals the
	// given JSON value (a missing field equals null); otherwise the patch
	// is events.EFieldMismatch with Current holding the entry. This is the
	// compare-and-swap of one field: of N workers claiming a job with
	// If {state = "pending"} and Set {state: "claimed"}, one wins.
	If *FieldCondition
	// Create starts a missing key from {}.
	Create          bool
	ExpectedVersion *int64
	// TTL, when set, expires the entry this long after the patch; 0 keeps
	// its current expiry.
	TTL       time.Duration
	Semantics events.Semantics
	RequestID string
	SpecRef   string
}

// FieldCondition is the guard of a field compare-and-swap.
type FieldCondition struct {
	Field  string          `json:"field"`
	Equals json.RawMessage `json:"equals"`
}

// patchBody is the wire form of PatchRequest (api.PatchBody).
type patchBody struct {
	Set             map[string]json.RawMessage `json:"set,omitempty"`
	Unset           []string                   `json:"unset,omitempty"`
	If              *FieldCondition            `json:"if,omitempty"`
	Create          bool                       `json:"create,omitempty"`
	ExpectedVersion *int64                     `json:"expectedVersion,omitempty"`
	TTLSeconds      *int64                     `json:"ttlSeconds,omitempty"`
	Semantics       *events.Semantics          `json:"semantics,omitempty"`
	RequestID       string                     `json:"requestId,omitempty"`
	SpecRef         string                     `json:"specRef,omitempty"`
}

// Patch applies r to the object at r.Key and returns the entry after it.
// A key that holds anything but an object is events.EWrongType.
func (c *Client) Patch(ctx context.Context, r PatchRequest) (PutResult, error) {
	p, err := keyPath(r.Key)
	if err != nil {
		return PutResult{}, err
	}
	b := patchBody{Set: r.Set, Unset: r.Unset, If: r.If, Create: r.Create, ExpectedVersion: r.ExpectedVersion, RequestID: r.RequestID, SpecRef: r.SpecRef}
	if b.TTLSeconds, err = ttlSeconds(r.TTL); err != nil {
		return PutResult{}, err
	}
	if !isZero(r.Semantics) {
		b.Semantics = &r.Semantics
	}
	body, err := marshal(b)
	if err != nil {
		return PutResult{}, err
	}
	var res PutResult
	h, err := c.do(ctx, call{method: http.MethodPatch, path: p, body: body, key: r.Key, retry: r.RequestID != ""}, &res.Entry)
	if err != nil {
		return PutResult{}, err
	}
	res.Replayed = h.Get("Eskv-Replayed") == "true"
	return res, nil
}

// Field is one top-level field of an object value (api.FieldAnswer).
type Field struct {
	Key     string          `json:"key"`
	Version int64           `json:"version"`
	Field   string          `json:"field"`
	Value   json.RawMessage `json:"value"`
}

// GetField returns one top-level field of the object at key. A missing
// key or field is events.ENotFound (Field "key" or "field"); a value that
// is not an object is events.EWrongType.
func (c *Client) GetField(ctx context.Context, key, field string) (Field, error) {
	p, err := keyPath(key)
	if err != nil {
		return Field{}, err
	}
	var f Field
	_, err = c.do(ctx, call{method: http.MethodGet, path: p, query: url.Values{"field": {field}}, key: key, retry: true}, &f)
	return f, err
}
