package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/eskv/eskv/contract"
)

// Call sends op, one of the contract's custom methods, on key: a POST of
// body for a write, a GET for a read (body nil). It decodes the answer as
// Ans and reports whether the server answered a repeated write as a
// replay (the Eskv-Replayed header). Reads are retried like Get; writes
// only when body is idempotent (it carries a requestId). A new operation
// of the contract is called this way with no change to the client:
//
//	lock, _, err := client.Call[contract.LockAnswer](ctx, c, contract.OpLockCheck, key, nil)
func Call[Ans any](ctx context.Context, c *Client, op contract.Op, key string, body any) (ans Ans, replayed bool, err error) {
	return callWait[Ans](ctx, c, op, key, body, 0)
}

// callWait is Call of an op that may wait (contract.Waits) up to wait on
// the server (blocking waits: waits.go).
func callWait[Ans any](ctx context.Context, c *Client, op contract.Op, key string, body any, wait time.Duration) (ans Ans, replayed bool, err error) {
	if op.Verb() == "" {
		return ans, false, contract.Errorf(contract.EInvalid, "op %s is not a custom method of the API", op)
	}
	p, err := keyPath(key)
	if err != nil {
		return ans, false, err
	}
	cl := call{method: http.MethodGet, path: p + ":" + op.Verb(), key: key, retry: true}
	if wait > 0 && contract.Waits(op) {
		cl.wait = wait
	}
	if !op.Reads() {
		cl.method = http.MethodPost
		if cl.body, err = marshal(body); err != nil {
			return ans, false, err
		}
		i, ok := body.(interface{ Idempotent() bool })
		cl.retry = ok && i.Idempotent()
	}
	h, err := c.do(ctx, cl, &ans)
	if err != nil {
		var zero Ans
		return zero, false, err
	}
	return ans, h.Get("Eskv-Replayed") == "true", nil
}

// IncrementRequest adds to a counter: a key whose value is a JSON integer.
type IncrementRequest struct {
	// Key is the counter's key.
	Key string
	// By is the amount to add; negative decrements; 0 means 1.
	By int64
	// Min and Max, when set, bound the result: the server refuses an
	// increment whose result would be below Min or above Max with
	// contract.EOutOfRange, Field "min" or "max", and Current the counter
	// (its value only for a principal that may read it). Nothing is
	// written: a rate limit is a decrement with Min 0, one request that
	// concurrent callers cannot overdraw.
	Min, Max *int64
	// Create starts a missing (or expired, or deleted) key from 0;
	// without it a missing key is contract.ENotFound.
	Create bool
	// ExpectedVersion, when set, makes the increment a compare-and-swap.
	ExpectedVersion *int64
	// TTL, when set, expires the counter this long after the increment;
	// 0 keeps its current expiry.
	TTL time.Duration
	// Semantics, when set, replace the entry's; a new counter gets
	// purpose "counter".
	Semantics contract.Semantics
	// RequestID makes the increment idempotent (and retried): repeating
	// it does not add twice.
	RequestID string
	// SpecRef references the spec or decision record the write follows.
	SpecRef string
}

// Counter is a counter after an increment.
type Counter struct {
	// Value is the counter's new value.
	Value int64
	// Entry is the key's entry after the increment.
	Entry contract.Entry
	// Replayed is true when the request repeated the key's last write.
	Replayed bool
}

// Increment adds r.By (default 1) to the integer at r.Key atomically and
// returns the new value. A key that holds anything but an integer is
// contract.EWrongType; leaving the int64 range is contract.EOutOfRange (Field
// "by"), and so is leaving r.Min or r.Max (Field "min" or "max").
func (c *Client) Increment(ctx context.Context, r IncrementRequest) (Counter, error) {
	o, err := writeOptions(r.Create, r.ExpectedVersion, r.TTL, r.Semantics, r.RequestID, r.SpecRef)
	if err != nil {
		return Counter{}, err
	}
	b := contract.IncrementBody{Min: r.Min, Max: r.Max, WriteOptions: o}
	if r.By != 0 {
		b.By = &r.By
	}
	var out Counter
	if out.Entry, out.Replayed, err = Call[contract.Entry](ctx, c, contract.OpIncrement, r.Key, &b); err != nil {
		return Counter{}, err
	}
	if err := json.Unmarshal(out.Entry.Value, &out.Value); err != nil {
		return Counter{}, contract.Errorf(contract.EInternal, "counter %s answered %s: %v", r.Key, out.Entry.Value, err)
	}
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
		return nil, contract.FieldErrorf(contract.EInvalid, "ttlSeconds", "TTL %v is not a positive whole number of seconds", d)
	}
	n := int64(d / time.Second)
	return &n, nil
}

// writeOptions is the wire form of the options an increment and a patch
// share.
func writeOptions(create bool, expected *int64, ttl time.Duration, sem contract.Semantics, requestID, specRef string) (contract.WriteOptions, error) {
	o := contract.WriteOptions{Create: create, ExpectedVersion: expected, Semantics: semantics(sem), RequestID: requestID, SpecRef: specRef}
	var err error
	o.TTLSeconds, err = ttlSeconds(ttl)
	return o, err
}

// semantics is the wire form of optional semantics: nil when none are
// given.
func semantics(s contract.Semantics) *contract.Semantics {
	if isZero(s) {
		return nil
	}
	return &s
}

// LockRequest takes part in a lock or a leader pool.
type LockRequest struct {
	// Key is the lock's or the election's key.
	Key string
	// Holder identifies the caller (a host/pid, a pod name, a UUID): only
	// the holder may extend or release.
	Holder string
	// TTL is the lease (default 60 s on the server); ignored by release.
	TTL time.Duration
	// Semantics may name a producer and consumer hints; the purpose is
	// always "lock" or "leader".
	Semantics contract.Semantics
	// RequestID makes the call idempotent (and retried).
	RequestID string
	// SpecRef references the spec or decision record the call follows.
	SpecRef string
	// Wait, on AcquireLock, has the server hold the request up to this
	// long (at most contract.MaxWait) until the lock is granted: waiters
	// are granted in arrival order. Across a writer's failover the
	// client retries with what is left of it (the acquire then carries a
	// requestId, given when RequestID is empty). When it ends first,
	// contract.ELockHeld.
	Wait time.Duration
	// Session attaches the lock or leadership AcquireLock or Elect takes
	// to the session at that key (Session.Key, in the same project): it
	// has no lease of its own (TTL must be 0) and is released when the
	// session ends.
	Session string
}

// Lock is a held lock or leadership. Its Token is the fencing token: pass
// it to the resources the lock protects and have them refuse any token
// lower than the highest they have seen.
type Lock = contract.LockAnswer

// ReleaseResult is the answer of ReleaseLock and Resign.
type ReleaseResult = contract.ReleaseAnswer

// AcquireLock takes the lock at r.Key for r.Holder without waiting. A lock
// held by another holder is contract.ELockHeld, with Current holding the
// lock's entry (its value names the holder; ExpiresAt the lease's end).
func (c *Client) AcquireLock(ctx context.Context, r LockRequest) (Lock, error) {
	return c.lockCall(ctx, r, contract.OpLockAcquire)
}

// ExtendLock renews the lease of a lock r.Holder holds; otherwise
// contract.ENotLockHolder.
func (c *Client) ExtendLock(ctx context.Context, r LockRequest) (Lock, error) {
	return c.lockCall(ctx, r, contract.OpLockExtend)
}

// ReleaseLock frees a lock r.Holder holds; otherwise contract.ENotLockHolder.
func (c *Client) ReleaseLock(ctx context.Context, r LockRequest) (ReleaseResult, error) {
	return c.releaseCall(ctx, r, contract.OpLockRelease)
}

// CheckLock returns the lock's holder; a free lock is contract.ENotFound.
func (c *Client) CheckLock(ctx context.Context, key string) (Lock, error) {
	l, _, err := Call[Lock](ctx, c, contract.OpLockCheck, key, nil)
	return l, err
}

// Elect makes r.Holder the leader of the pool at r.Key if it has none, or
// renews r.Holder's leadership. Another leader is contract.ENotLeader, with
// Current holding the leadership's entry.
func (c *Client) Elect(ctx context.Context, r LockRequest) (Lock, error) {
	return c.lockCall(ctx, r, contract.OpLeaderElect)
}

// Heartbeat renews r.Holder's leadership; otherwise contract.ENotLeader.
func (c *Client) Heartbeat(ctx context.Context, r LockRequest) (Lock, error) {
	return c.lockCall(ctx, r, contract.OpLeaderHeartbeat)
}

// Resign ends r.Holder's leadership; otherwise contract.ENotLeader.
func (c *Client) Resign(ctx context.Context, r LockRequest) (ReleaseResult, error) {
	return c.releaseCall(ctx, r, contract.OpLeaderResign)
}

// Leader returns the pool's leader; a pool without one is
// contract.ENotFound.
func (c *Client) Leader(ctx context.Context, key string) (Lock, error) {
	l, _, err := Call[Lock](ctx, c, contract.OpLeaderCheck, key, nil)
	return l, err
}

func (c *Client) lockCall(ctx context.Context, r LockRequest, op contract.Op) (Lock, error) {
	b, err := lockBody(r)
	if err != nil {
		return Lock{}, err
	}
	var wait time.Duration
	if op == contract.OpLockAcquire && r.Wait > 0 {
		if r.Wait > contract.MaxWait {
			return Lock{}, contract.FieldErrorf(contract.EInvalid, contract.WaitParam, "wait %v is over %v", r.Wait, contract.MaxWait)
		}
		wait, b.RequestID = r.Wait, orNewID(b.RequestID)
	}
	l, replayed, err := callWait[Lock](ctx, c, op, r.Key, &b, wait)
	l.Replayed = replayed
	return l, err
}

// releaseCall sends release or resign, which take no lease or semantics.
func (c *Client) releaseCall(ctx context.Context, r LockRequest, op contract.Op) (ReleaseResult, error) {
	r.TTL, r.Semantics = 0, contract.Semantics{}
	b, err := lockBody(r)
	if err != nil {
		return ReleaseResult{}, err
	}
	res, replayed, err := Call[ReleaseResult](ctx, c, op, r.Key, &b)
	res.Replayed = replayed
	return res, err
}

func lockBody(r LockRequest) (contract.LockBody, error) {
	b := contract.LockBody{Holder: r.Holder, RequestID: r.RequestID, SpecRef: r.SpecRef, Semantics: semantics(r.Semantics), Session: r.Session}
	var err error
	b.TTLSeconds, err = ttlSeconds(r.TTL)
	return b, err
}

// PatchRequest changes top-level fields of an object value without a
// read-modify-write.
type PatchRequest struct {
	// Key is the entry patched; its value is a JSON object.
	Key string
	// Set gives fields their new JSON values (json.RawMessage("null")
	// stores null); Unset removes fields.
	Set map[string]json.RawMessage
	// Unset lists the fields removed.
	Unset []string
	// If, when set, applies the patch only while the field equals the
	// given JSON value (a missing field equals null); otherwise the patch
	// is contract.EFieldMismatch with Current holding the entry. This is the
	// compare-and-swap of one field: of N workers claiming a job with
	// If {state = "pending"} and Set {state: "claimed"}, one wins.
	If *FieldCondition
	// Create starts a missing key from {}.
	Create bool
	// ExpectedVersion, when set, makes the patch a compare-and-swap of
	// the whole entry.
	ExpectedVersion *int64
	// TTL, when set, expires the entry this long after the patch; 0 keeps
	// its current expiry.
	TTL time.Duration
	// Semantics, when set, replace the entry's.
	Semantics contract.Semantics
	// RequestID makes the patch idempotent (and retried).
	RequestID string
	// SpecRef references the spec or decision record the write follows.
	SpecRef string
}

// FieldCondition is the guard of a field compare-and-swap.
type FieldCondition = contract.FieldCondition

// Patch applies r to the object at r.Key and returns the entry after it.
// A key that holds anything but an object is contract.EWrongType.
func (c *Client) Patch(ctx context.Context, r PatchRequest) (PutResult, error) {
	o, err := writeOptions(r.Create, r.ExpectedVersion, r.TTL, r.Semantics, r.RequestID, r.SpecRef)
	if err != nil {
		return PutResult{}, err
	}
	b := contract.PatchBody{Set: r.Set, Unset: r.Unset, If: r.If, WriteOptions: o}
	return c.writeEntry(ctx, http.MethodPatch, r.Key, &b, b.Idempotent())
}

// Field is one top-level field of an object value.
type Field = contract.FieldAnswer

// GetField returns one top-level field of the object at key. A missing
// key or field is contract.ENotFound (Field "key" or "field"); a value that
// is not an object is contract.EWrongType.
func (c *Client) GetField(ctx context.Context, key, field string) (Field, error) {
	p, err := keyPath(key)
	if err != nil {
		return Field{}, err
	}
	var f Field
	_, err = c.do(ctx, call{method: http.MethodGet, path: p, query: url.Values{"field": {field}}, key: key, retry: true}, &f)
	return f, err
}
