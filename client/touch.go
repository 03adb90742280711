package client

import (
	"context"
	"time"

	"github.com/eskv/eskv/contract"
)

// TouchRequest gives an existing entry a new expiry without rewriting
// its value (Redis EXPIRE, or PERSIST with Persist; an etcd lease's
// keep-alive for one key). Exactly one of TTL and Persist is given.
type TouchRequest struct {
	// Key is the entry's key.
	Key string
	// TTL expires the entry this long after the touch, in whole seconds.
	TTL time.Duration
	// Persist removes the entry's expiry.
	Persist bool
	// ExpectedVersion, when set, makes the touch a compare-and-swap: the
	// key must be at this (positive) version.
	ExpectedVersion *int64
	// RequestID makes the touch idempotent (and retried), see
	// PutRequest.
	RequestID string
}

// Touch sets the expiry of r.Key and keeps its value, semantics and
// specRef: the touch is a write, the key's next version, and watchers
// see it (op touch). A key that is absent, deleted or expired is
// contract.ENotFound; a version mismatch is contract.EConflict with the
// key's current entry; a held lock or leadership is contract.ELockHeld or
// contract.ENotLeader (renew those with their own operations), and a
// collection contract.EWrongType.
func (c *Client) Touch(ctx context.Context, r TouchRequest) (PutResult, error) {
	b := contract.TouchBody{Persist: r.Persist, ExpectedVersion: r.ExpectedVersion, RequestID: r.RequestID}
	var err error
	if b.TTLSeconds, err = ttlSeconds(r.TTL); err != nil {
		return PutResult{}, err
	}
	if err := b.Validate(); err != nil {
		return PutResult{}, err
	}
	var res PutResult
	if res.Entry, res.Replayed, err = Call[contract.Entry](ctx, c, contract.OpTouch, r.Key, &b); err != nil {
		return PutResult{}, err
	}
	return res, nil
}
