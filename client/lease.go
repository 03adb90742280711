package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eskv/eskv/contract"
)

// Lease keeping: KeepLock and KeepLeadership take a lock or leadership
// and renew its lease in the background, as consul's api.Lock and etcd's
// concurrency.Session keep theirs. Done closes when the lease is no longer
// kept: lost, released, or its context ended.
//
// The lease is timed on the local clock, never on the server's ExpiresAt
// (clocks differ): a lease granted by an answer to a request sent at t
// ends at t+TTL at the earliest, since the server decided after t. A
// renewal that does not get through before that end minus the margin
// counts as a loss, so the holder stops before another may take over.

// ErrLeaseLost is matched (errors.Is) by the *LostError of a lease that
// was lost.
var ErrLeaseLost = errors.New("lease lost")

// ErrLeaseReleased is a lease's Err after Release.
var ErrLeaseReleased = errors.New("lease released")

// LostError tells why a lease was lost.
type LostError struct {
	Key   string // the lock's or the election's key
	Token int64  // the tenure's fencing token
	// Err is the renewal's error: the server's refusal
	// (contract.ENotLockHolder, contract.ENotLeader, ...), or when Unconfirmed
	// the last error of the retries (nil if none ended before the
	// deadline).
	Err error
	// Unconfirmed is true when no renewal got through before the margin
	// before the lease's end: the server may still count the holder as
	// holding it until the lease ends.
	Unconfirmed bool
	// NewToken is set when a renewal found the key under another tenure
	// of the same holder (it was released and taken again).
	NewToken int64
}

// Error says which tenure was lost, and how.
func (e *LostError) Error() string {
	switch {
	case e.NewToken != 0:
		return fmt.Sprintf("lease of %s lost: the token is %d now, not %d", e.Key, e.NewToken, e.Token)
	case e.Unconfirmed && e.Err != nil:
		return fmt.Sprintf("lease of %s lost: no renewal got through before it ended: %v", e.Key, e.Err)
	case e.Unconfirmed:
		return fmt.Sprintf("lease of %s lost: no renewal got through before it ended", e.Key)
	}
	return fmt.Sprintf("lease of %s lost: %v", e.Key, e.Err)
}

// Unwrap returns the renewal's error.
func (e *LostError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrLeaseLost) hold.
func (e *LostError) Is(target error) bool { return target == ErrLeaseLost }

// ReenteredError is KeepLock's or KeepLeadership's error when the holder
// already held the key: keeping it would share one tenure with whoever
// took it (releasing one would free both). The lock is left as it was.
type ReenteredError struct {
	Lock Lock // the tenure the holder already had
}

// Error names the holder, the key and the tenure's token.
func (e *ReenteredError) Error() string {
	return fmt.Sprintf("%s already holds %s (token %d)", e.Lock.Holder, e.Lock.Key, e.Lock.Token)
}

// LeaseOption configures KeepLock and KeepLeadership.
type LeaseOption func(*leaseConfig)

type leaseConfig struct {
	take        func(context.Context, func(context.Context) (Lock, error)) (Lock, error)
	margin      time.Duration
	callTimeout time.Duration
}

// WithTake runs the first acquire through take, which calls try (one
// AcquireLock or Elect) as often as it likes, for example while another
// holder has the lock, and bounds it with its own context if it wants.
// Without it the key is tried once.
func WithTake(take func(ctx context.Context, try func(context.Context) (Lock, error)) (Lock, error)) LeaseOption {
	return func(c *leaseConfig) { c.take = take }
}

// WithMargin counts the lease as lost d before it would end when no
// renewal got through, so the holder has d to stop its work (default a
// third of the TTL; at most that).
func WithMargin(d time.Duration) LeaseOption { return func(c *leaseConfig) { c.margin = d } }

// WithCallTimeout bounds each renewal call (default: the time left until
// the lease counts as lost).
func WithCallTimeout(d time.Duration) LeaseOption { return func(c *leaseConfig) { c.callTimeout = d } }

// leaseCalls are the three calls of a role: lock or leadership.
type leaseCalls struct {
	take, renew func(*Client, context.Context, LockRequest) (Lock, error)
	release     func(*Client, context.Context, LockRequest) (ReleaseResult, error)
}

var (
	lockCalls   = leaseCalls{take: (*Client).AcquireLock, renew: (*Client).ExtendLock, release: (*Client).ReleaseLock}
	leaderCalls = leaseCalls{take: (*Client).Elect, renew: (*Client).Heartbeat, release: (*Client).Resign}
)

// Lease is a lock or leadership whose lease is being renewed, every
// third of its TTL, until ctx ends, Release, or the lease is lost. It is
// safe for concurrent use.
type Lease struct {
	c     *Client
	calls leaseCalls
	req   LockRequest // the renewals' request: TTL set
	cfg   leaseConfig
	token int64
	every time.Duration

	ctx  context.Context // ends when the lease stops being kept
	stop context.CancelCauseFunc
	done chan struct{}

	mu   sync.Mutex
	lock Lock      // the latest answer
	end  time.Time // the lease's end at the earliest

	releaseOnce sync.Once
	releaseErr  error
}

// KeepLock takes the lock at r.Key for r.Holder (once, or as WithTake
// tries) and keeps renewing its lease with r.TTL (the server's default
// lease when 0) until ctx ends, Release, or the lease is lost; see Lease.
// A lock r.Holder already held is a *ReenteredError.
func (c *Client) KeepLock(ctx context.Context, r LockRequest, opts ...LeaseOption) (*Lease, error) {
	return c.keep(ctx, r, lockCalls, opts)
}

// KeepLeadership is KeepLock for a leader pool: Elect, then Heartbeat
// until ctx ends, Release (which resigns), or the leadership is lost.
func (c *Client) KeepLeadership(ctx context.Context, r LockRequest, opts ...LeaseOption) (*Lease, error) {
	return c.keep(ctx, r, leaderCalls, opts)
}

func (c *Client) keep(ctx context.Context, r LockRequest, calls leaseCalls, opts []LeaseOption) (*Lease, error) {
	var cfg leaseConfig
	for _, o := range opts {
		o(&cfg)
	}
	var sent time.Time
	try := func(ctx context.Context) (Lock, error) {
		sent = time.Now()
		return calls.take(c, ctx, r)
	}
	var (
		l   Lock
		err error
	)
	if cfg.take != nil {
		l, err = cfg.take(ctx, try)
	} else {
		l, err = try(ctx)
	}
	if err != nil {
		return nil, err
	}
	if l.Reentered {
		return nil, &ReenteredError{Lock: l}
	}
	if r.TTL == 0 && l.ExpiresAt != nil {
		r.TTL = l.ExpiresAt.Sub(l.AcquiredAt).Round(time.Second)
	}
	if r.TTL <= 0 {
		_, _ = calls.release(c, context.WithoutCancel(ctx), LockRequest{Key: r.Key, Holder: r.Holder, RequestID: newLeaseID()})
		return nil, contract.Errorf(contract.EInternal, "%s of %s answered without a lease", r.Key, r.Holder)
	}
	r.RequestID = ""
	if r.Wait > 0 {
		// The grant came after a wait on the server: when the acquire
		// was sent is no bound of its lease's start any more. When an
		// extend is sent is.
		sent = time.Now()
		renewed, err := calls.renew(c, ctx, r)
		if err != nil {
			_, _ = calls.release(c, context.WithoutCancel(ctx), LockRequest{Key: r.Key, Holder: r.Holder, RequestID: newLeaseID()})
			return nil, err
		}
		renewed.Reentered = false
		l = renewed
	}
	every := r.TTL / 3
	cfg.margin = min(cfg.margin, every)
	if cfg.margin <= 0 {
		cfg.margin = every
	}
	lease := &Lease{c: c, calls: calls, req: r, cfg: cfg, token: l.Token, every: every, done: make(chan struct{}),
		lock: l, end: sent.Add(r.TTL)}
	lease.ctx, lease.stop = context.WithCancelCause(ctx)
	go func() {
		defer close(lease.done)
		lease.stop(lease.renew())
	}()
	return lease, nil
}

// Done closes when the lease is no longer kept: lost, released, or its
// context ended. Err then says which.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Context is a context that ends when the lease is no longer kept, with
// Err as its cause: run the work the lock protects under it.
func (l *Lease) Context() context.Context { return l.ctx }

// Err is nil while the lease is kept; after Done it is a *LostError
// (errors.Is ErrLeaseLost), ErrLeaseReleased, or the cause of ctx's end.
func (l *Lease) Err() error {
	select {
	case <-l.done:
		return context.Cause(l.ctx)
	default:
		return nil
	}
}

// Token is the tenure's fencing token: hand it to the resources the lock
// protects.
func (l *Lease) Token() int64 { return l.token }

// Lock is the latest answer: the acquire's, or the last renewal's.
func (l *Lease) Lock() Lock {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lock
}

// Release stops renewing and releases (or resigns) the key, once: later
// calls return the first one's result. It sends nothing when the server
// already said the lease was lost, and returns Err then; after a loss
// that was not confirmed it still releases, in case the server kept it.
func (l *Lease) Release(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		l.stop(ErrLeaseReleased)
		<-l.done
		var lost *LostError
		if errors.As(l.Err(), &lost) && !lost.Unconfirmed {
			l.releaseErr = lost
			return
		}
		_, l.releaseErr = l.calls.release(l.c, ctx, LockRequest{Key: l.req.Key, Holder: l.req.Holder, RequestID: newLeaseID()})
	})
	return l.releaseErr
}

// renew renews the lease every third of its TTL until l.ctx ends (nil)
// or the lease is lost (a *LostError).
func (l *Lease) renew() error {
	for {
		l.mu.Lock()
		next := l.end.Add(l.every - l.req.TTL)
		l.mu.Unlock()
		if !sleepUntil(l.ctx, next) {
			return nil
		}
		if err := l.renewOnce(); err != nil || l.ctx.Err() != nil {
			return err
		}
	}
}

// renewOnce renews the lease, retrying transient errors until the margin
// before its end.
func (l *Lease) renewOnce() error {
	l.mu.Lock()
	limit := l.end.Add(-l.cfg.margin)
	l.mu.Unlock()
	var last error
	waits := l.c.policy.waits()
	for {
		if !time.Now().Before(limit) {
			return &LostError{Key: l.req.Key, Token: l.token, Err: last, Unconfirmed: true}
		}
		deadline := limit
		if l.cfg.callTimeout > 0 {
			deadline = earliest(time.Now().Add(l.cfg.callTimeout), limit)
		}
		ctx, cancel := context.WithDeadline(l.ctx, deadline)
		r := l.req
		r.RequestID = newLeaseID()
		sent := time.Now()
		got, err := l.calls.renew(l.c, ctx, r)
		cancel()
		switch {
		case l.ctx.Err() != nil:
			return nil
		case err == nil && got.Token != l.token:
			return &LostError{Key: l.req.Key, Token: l.token, NewToken: got.Token}
		case err == nil:
			l.mu.Lock()
			l.lock, l.end = got, sent.Add(l.req.TTL)
			l.mu.Unlock()
			return nil
		case !transient(err):
			return &LostError{Key: l.req.Key, Token: l.token, Err: err}
		}
		last = err
		wait, _ := waits.Next()
		if !sleepUntil(l.ctx, earliest(time.Now().Add(max(wait, retryAfter(err))), limit)) {
			return nil
		}
	}
}

// transient tells errors worth retrying a renewal for.
func transient(err error) bool {
	var ne *NetworkError
	if errors.As(err, &ne) || errors.Is(err, ErrUnexpectedAnswer) {
		return true
	}
	switch contract.ErrorCode(err) {
	case contract.EUnavailable, contract.EOutcomeUnknown, contract.EForwardLoop, contract.EInternal:
		return true
	}
	return false
}

func newLeaseID() string { return "lease-" + rand.Text() }

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
