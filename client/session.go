package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eskv/eskv/contract"
)

// Sessions (docs/sessions.md): a session is an entry with a TTL that one
// call keeps alive; keys, locks and leaderships written with its key
// (PutRequest.Session, LockRequest.Session) are attached to it and end
// with it, in one transaction. Session keeps one alive in the
// background, as etcd's concurrency.Session keeps a lease.

// SessionInfo is a session as the server answers it: its version, TTL,
// expiry and attached keys (and, after a revoke, the keys its end
// deleted or released).
type SessionInfo = contract.SessionAnswer

// CreateSession starts a session at key with ttl (whole seconds, at
// least 1 s). A key that holds a live entry is contract.EConflict.
func (c *Client) CreateSession(ctx context.Context, key string, ttl time.Duration, requestID string) (SessionInfo, error) {
	secs, err := ttlSeconds(ttl)
	if err != nil {
		return SessionInfo{}, err
	}
	b := contract.SessionBody{RequestID: requestID}
	if secs != nil {
		b.TTLSeconds = *secs
	}
	if err := b.Validate(); err != nil {
		return SessionInfo{}, err
	}
	a, _, err := Call[SessionInfo](ctx, c, contract.OpSessionCreate, key, &b)
	return a, err
}

// KeepAlive renews the session at key: its expiry is its TTL from now.
// An ended or expired session is contract.ENotFound.
func (c *Client) KeepAlive(ctx context.Context, key string) (SessionInfo, error) {
	a, _, err := Call[SessionInfo](ctx, c, contract.OpSessionKeepAlive, key, &contract.SessionWriteBody{})
	return a, err
}

// RevokeSession ends the session at key: the keys attached to it are
// deleted and its locks and leaderships released with it, in one
// transaction. An ended or expired session is contract.ENotFound.
func (c *Client) RevokeSession(ctx context.Context, key string) (SessionInfo, error) {
	a, _, err := Call[SessionInfo](ctx, c, contract.OpSessionRevoke, key, &contract.SessionWriteBody{})
	return a, err
}

// GetSession reads the session at key; an ended one is
// contract.ENotFound, a key that is no session contract.EWrongType.
func (c *Client) GetSession(ctx context.Context, key string) (SessionInfo, error) {
	e, err := c.Get(ctx, key)
	if err != nil {
		return SessionInfo{}, err
	}
	var v contract.SessionValue
	if e.Semantics.Purpose != contract.PurposeSession || json.Unmarshal(e.Value, &v) != nil {
		return SessionInfo{}, contract.FieldErrorf(contract.EWrongType, "key", "key %s is no session", key)
	}
	return SessionInfo{Key: e.Key, Version: e.Version, TTLSeconds: v.TTLSeconds, ExpiresAt: e.ExpiresAt, Attached: v.Attached}, nil
}

// ErrSessionClosed is a Session's Err after Close.
var ErrSessionClosed = errors.New("session closed")

// Session is a session kept alive in the background: a keep-alive every
// TTL/3 (retried until the session's end as this process counts it on
// its own clock, from when the last renewal that got through was sent).
// Done closes when it is no longer kept: lost (the server ended it, or
// no renewal got through in time), closed, or its context ended.
type Session struct {
	c    *Client
	key  string
	ttl  time.Duration
	stop context.CancelCauseFunc
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// NewSession creates a session at key with ttl and keeps it alive until
// Close, its loss, or the end of ctx.
func NewSession(ctx context.Context, c *Client, key string, ttl time.Duration) (*Session, error) {
	sent := time.Now()
	if _, err := c.CreateSession(ctx, key, ttl, ""); err != nil {
		return nil, err
	}
	kctx, stop := context.WithCancelCause(ctx)
	s := &Session{c: c, key: key, ttl: ttl.Truncate(time.Second), stop: stop, done: make(chan struct{})}
	go s.keep(kctx, sent)
	return s, nil
}

// Key is the session's key: name it as PutRequest.Session or
// LockRequest.Session to attach a key, lock or leadership.
func (s *Session) Key() string { return s.key }

// Done closes when the session is no longer kept alive.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why Done closed: ErrSessionClosed, a *LostError (matching
// ErrLeaseLost), or the context's error; nil while it is kept.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close stops the keep-alives and revokes the session, ending what is
// attached to it at once (not at its expiry). A session already lost is
// not revoked again.
func (s *Session) Close(ctx context.Context) error {
	s.stop(ErrSessionClosed)
	<-s.done
	if s.Err() != ErrSessionClosed {
		return nil
	}
	if _, err := s.c.RevokeSession(ctx, s.key); err != nil && contract.ErrorCode(err) != contract.ENotFound {
		return fmt.Errorf("revoke session %s: %w", s.key, err)
	}
	return nil
}

// keep renews the session every ttl/3 until ctx ends or the session is
// lost: refused (ended, expired), or no renewal through before
// sent+ttl, sent being when the last renewal that got through was sent.
func (s *Session) keep(ctx context.Context, sent time.Time) {
	end := func(err error) {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.done)
	}
	every := max(s.ttl/3, 100*time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	var last error
	for {
		select {
		case <-ctx.Done():
			end(context.Cause(ctx))
			return
		case <-t.C:
		}
		deadline := sent.Add(s.ttl)
		if !time.Now().Before(deadline) {
			end(&LostError{Key: s.key, Err: last, Unconfirmed: true})
			return
		}
		at := time.Now()
		rctx, cancel := context.WithDeadline(ctx, deadline)
		_, err := s.c.KeepAlive(rctx, s.key)
		cancel()
		switch code := contract.ErrorCode(err); {
		case err == nil:
			sent, last = at, nil
			t.Reset(every)
		case code == contract.ENotFound || code == contract.EWrongType:
			end(&LostError{Key: s.key, Err: err})
			return
		default:
			last = err
			t.Reset(min(every/4, time.Until(deadline)))
		}
	}
}
