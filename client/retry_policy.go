package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/eskv/eskv/contract"
)

// Defaults of the retry policy: the semantic-KV seed's "Retry & Backoff".
const (
	// DefaultAttempts is how many times a call is tried in all on
	// transient errors before it escalates.
	DefaultAttempts = 5
	// DefaultMinWait and DefaultMaxWait bound the jittered exponential
	// wait between transient tries.
	DefaultMinWait = 100 * time.Millisecond
	DefaultMaxWait = 2 * time.Second
	// DefaultConflictBase and DefaultConflictCap make Update's conflict
	// schedule 1 s, 2 s, 4 s, 8 s, 16 s, 32 s, then escalation.
	DefaultConflictBase = time.Second
	DefaultConflictCap  = 32 * time.Second
	// DefaultAttemptTimeout bounds each try: a little above the
	// server's request deadline (5 s by default), after which it
	// answers whatever its dependencies do, so a try that outlasts it
	// lost its answer (a hung connection, a paused server).
	DefaultAttemptTimeout = 10 * time.Second
)

// RetryPolicy is how the client retries, after the semantic-KV seed's
// "Retry & Backoff". Every error falls in one class (Classify):
//
//   - transient (ClassTransient): no HTTP answer at all (connection
//     refused or reset, DNS, a transport timeout, AttemptTimeout), 503
//     partition_unavailable or outcome_unknown, and 429, 502, 503 or 504
//     answers that are not eskv's (a proxy's). Reads, and writes that
//     carry a requestId, are tried up to Attempts times in all with
//     jittered exponential waits, a write always with its requestId (the
//     server applies it once at most, and answers its repeat as a replay
//     when the lost try was applied); then the call escalates
//     (*EscalationError). A write without a requestId is tried once.
//   - conflict (ClassConflict): 409 version_conflict on expectedVersion.
//     Update re-reads and tries again after ConflictBase, 2×, 4× … up to
//     ConflictCap, then escalates. Other calls return it at once: only
//     the caller knows how to redo its change.
//   - fatal (ClassFatal): everything else fails at once: 400 invalid, 401,
//     403, 404, 413, a requestId reused for another body (409
//     version_conflict on field requestId), the other 409s (lock_held,
//     field_mismatch, wrong_type, ...) and 500 internal, which is a
//     server fault for its maintainers, not a state that passes; and a
//     server certificate the client does not trust
//     (*tls.CertificateVerificationError: WithCAFile, WithTLSConfig).
//
// The end of the caller's ctx is never retried, and a wait that would
// outlast its deadline is not started: the call then returns its last
// error as is, not an escalation (the caller's budget ran out, not the
// policy's). A server's Retry-After is honoured even when longer than
// MaxWait.
//
// Zero fields take the defaults (DefaultRetryPolicy).
type RetryPolicy struct {
	// Attempts bounds the tries of one call on transient errors, the first
	// included; 1 disables retries.
	Attempts int
	// MinWait and MaxWait bound the waits between transient tries:
	// MinWait, 2×MinWait, 4×MinWait … capped at MaxWait, each drawn at
	// random from the upper half of that ceiling (w/2..w), so clients that
	// failed together do not retry together.
	MinWait, MaxWait time.Duration
	// AttemptTimeout bounds each try on its own; a try that runs out of
	// it is transient. Zero: DefaultAttemptTimeout; negative: only ctx
	// bounds each try. Watches are not bounded by it.
	AttemptTimeout time.Duration
	// ConflictBase and ConflictCap are Update's schedule: after the n-th
	// version conflict it waits ConflictBase×2^(n-1), capped at
	// ConflictCap; after the attempt that follows the wait of ConflictCap
	// it escalates. The defaults, 1 s and 32 s, give 7 attempts and
	// waits of 1, 2, 4, 8, 16 and 32 s.
	ConflictBase, ConflictCap time.Duration
	// ConflictJitter draws each conflict wait from its upper half as
	// transient waits are. Off by default: the seed asks for a
	// deterministic schedule. Turn it on when many writers contend for
	// one key, so that the losers of a round do not all meet again.
	ConflictJitter bool
	// OnRetry, when set, is told each error that is retried, which
	// attempt it ended (from 1) and the wait before the next one: to log
	// or count it (the seed logs conflicts at WARN). It must not block.
	OnRetry func(err error, attempt int, wait time.Duration)
}

// DefaultRetryPolicy is the policy of a client built without
// WithRetryPolicy or WithRetries.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Attempts: DefaultAttempts, MinWait: DefaultMinWait, MaxWait: DefaultMaxWait,
		AttemptTimeout: DefaultAttemptTimeout, ConflictBase: DefaultConflictBase, ConflictCap: DefaultConflictCap}
}

// WithRetryPolicy sets the client's retry policy; its zero fields keep
// the defaults.
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *Client) { c.policy = p.withDefaults() }
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	if p.Attempts <= 0 {
		p.Attempts = d.Attempts
	}
	if p.MinWait <= 0 {
		p.MinWait = d.MinWait
	}
	if p.MaxWait <= 0 {
		p.MaxWait = max(d.MaxWait, p.MinWait)
	}
	if p.AttemptTimeout == 0 {
		p.AttemptTimeout = d.AttemptTimeout
	}
	if p.ConflictBase <= 0 {
		p.ConflictBase = d.ConflictBase
	}
	if p.ConflictCap <= 0 {
		p.ConflictCap = max(d.ConflictCap, p.ConflictBase)
	}
	return p
}

// transient is the schedule of waits between transient tries:
// Attempts-1 of them.
func (p RetryPolicy) transient() *backoff {
	b := p.waits()
	b.left = max(p.Attempts-1, 0)
	return b
}

// waits is the unbounded schedule of transient waits: MinWait doubling
// up to MaxWait, jittered; all 0 when MinWait is not positive.
func (p RetryPolicy) waits() *backoff {
	if p.MinWait <= 0 {
		return &backoff{left: -1}
	}
	return &backoff{next: p.MinWait, cap: p.MaxWait, jitter: true, left: -1}
}

// conflict is Update's schedule: ConflictBase doubling up to
// ConflictCap, the last wait being ConflictCap.
func (p RetryPolicy) conflict() *backoff {
	waits := 0
	for w := p.ConflictBase; ; w *= 2 {
		waits++
		if w >= p.ConflictCap || w <= 0 {
			break
		}
	}
	return &backoff{next: p.ConflictBase, cap: p.ConflictCap, jitter: p.ConflictJitter, left: waits}
}

// backoff is a schedule of waits: next, then twice the one before,
// capped at cap; with jitter each is drawn from the upper half of its
// ceiling (w/2..w, "equal jitter"), so clients that failed together do
// not retry together and no wait overshoots the cap. It is one loop's
// own (not safe for concurrent use).
type backoff struct {
	next, cap time.Duration
	jitter    bool
	left      int // waits left; negative: no end
}

// Next returns the next wait, or stop when the schedule has none left.
func (b *backoff) Next() (wait time.Duration, stop bool) {
	if b.left == 0 {
		return 0, true
	}
	if b.left > 0 {
		b.left--
	}
	w := min(b.next, b.cap)
	switch {
	case b.next >= b.cap:
	case b.next > b.cap/2: // doubling would pass the cap (or overflow)
		b.next = b.cap
	default:
		b.next *= 2
	}
	if b.jitter && w > 0 {
		w = w/2 + rand.N(w/2+1)
	}
	return w, false
}

// Class is how the retry policy treats an error; see RetryPolicy.
type Class int

// The classes of errors.
const (
	ClassFatal Class = iota
	ClassTransient
	ClassConflict
)

// String names the class: fatal, transient or conflict.
func (c Class) String() string {
	switch c {
	case ClassTransient:
		return "transient"
	case ClassConflict:
		return "conflict"
	}
	return "fatal"
}

// Classify tells a non-nil error's class, as RetryPolicy describes. An
// *EscalationError is fatal: the policy has retried it already. Classify
// looks only at the error: the end of the caller's context is the
// retrying loop's concern.
func Classify(err error) Class {
	var esc *EscalationError
	if errors.As(err, &esc) {
		return ClassFatal
	}
	var ne *NetworkError
	if errors.As(err, &ne) {
		// A certificate the client does not trust stays untrusted:
		// retrying cannot help (WithCAFile, WithTLSConfig).
		var ce *tls.CertificateVerificationError
		if errors.As(err, &ce) {
			return ClassFatal
		}
		return ClassTransient
	}
	var e *contract.Error
	if !errors.As(err, &e) {
		return ClassFatal
	}
	switch {
	case e.Code == contract.EUnavailable, e.Code == contract.EOutcomeUnknown, e.Code == contract.EForwardLoop, e.Code == contract.ETooManyRequests:
		// outcome_unknown: only writes with a requestId are retried, and
		// with it. forward_loop: the writer reached is misconfigured, but another
		// one behind the same Service may answer the retry. too_many_requests:
		// the principal's share of a slot is full now; Retry-After says when.
		return ClassTransient
	case e.Code == contract.EConflict && e.Field != "requestId":
		return ClassConflict
	}
	return ClassFatal
}

// unexpectedTransient are the statuses whose answers, when not eskv's,
// are a proxy's or a gateway's "not now": transient.
var unexpectedTransient = map[int]bool{
	http.StatusTooManyRequests:    true,
	http.StatusBadGateway:         true,
	http.StatusServiceUnavailable: true,
	http.StatusGatewayTimeout:     true,
}

// EscalationError is the seed's escalation: a call the policy retried
// until it allowed no more. Err is the last try's error, so
// contract.ErrorCode and errors.As reach its *contract.Error or
// *NetworkError; Attempts counts the tries, the first included.
type EscalationError struct {
	Attempts int   // the tries made, the first included
	Err      error // the last try's error
	// DeadLetter is the key of the queue an escalated Update handed its
	// DeadLetter item to (UpdateOptions.DeadLetter); "" when none.
	DeadLetter string
}

// Error says how many tries were made, the last one's error, and the
// dead-letter queue that holds the escalated update.
func (e *EscalationError) Error() string {
	if e.DeadLetter != "" {
		return fmt.Sprintf("gave up after %d attempts: %v (handed to dead-letter queue %s)", e.Attempts, e.Err, e.DeadLetter)
	}
	return fmt.Sprintf("gave up after %d attempts: %v", e.Attempts, e.Err)
}

// Unwrap returns the last try's error.
func (e *EscalationError) Unwrap() error { return e.Err }

// retrying calls try until it succeeds, fails with an error retriable
// does not accept, or b stops (then the error escalates). A wait that
// would outlast ctx's deadline is not started and ctx ending during one
// ends it: both return the last error as is.
//
// It is not a generic retry loop because the policy's needs are its
// own: it answers the last error rather than ctx's, tells an escalation
// from a caller's ended budget, and waits at least a server's
// Retry-After.
func (p RetryPolicy) retrying(ctx context.Context, b *backoff, retriable func(error) bool, try func(ctx context.Context, attempt int) error) error {
	for attempt := 1; ; attempt++ {
		err := try(ctx, attempt)
		if err == nil || ctx.Err() != nil || !retriable(err) {
			return err
		}
		wait, stop := b.Next()
		if stop {
			return &EscalationError{Attempts: attempt, Err: err}
		}
		wait = max(wait, retryAfter(err))
		if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
			return err
		}
		if p.OnRetry != nil {
			p.OnRetry(err, attempt, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// do sends the call, retrying transient errors as the policy allows when
// the call is safe to repeat, and decodes a 2xx answer into out. It
// returns the answer's header.
func (c *Client) do(ctx context.Context, cl call, out any) (http.Header, error) {
	var h http.Header
	transient := func(err error) bool { return cl.retry && Classify(err) == ClassTransient }
	// A blocking wait ends at until, across retries: each attempt (at
	// another writer after a failover) asks what is left of it, and its
	// timeout grows by as much.
	until := time.Now().Add(cl.wait)
	schedule := c.policy.transient()
	if cl.wait > 0 {
		// Retried for as long as the wait lasts (a failover takes
		// longer than Attempts tries), and waitGrace after it.
		schedule = c.policy.waits()
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, until.Add(waitGrace))
		defer cancel()
	}
	err := c.policy.retrying(ctx, schedule, transient, func(ctx context.Context, _ int) error {
		attempt := cl
		var left time.Duration
		if cl.wait > 0 {
			left = max(time.Until(until), 0)
			attempt.query = url.Values{contract.WaitParam: {contract.FormatWait(left)}}
		}
		if c.policy.AttemptTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.policy.AttemptTimeout+left)
			defer cancel()
		}
		var err error
		h, err = c.once(ctx, attempt, out)
		return err
	})
	return h, err
}

// waitGrace is how long after its wait's end a blocking wait is still
// retried and its last attempt answered (the server's default request
// deadline).
const waitGrace = 5 * time.Second

// retryAfter is the server's requested wait carried by err, if any.
func retryAfter(err error) time.Duration {
	var e *contract.Error
	if errors.As(err, &e) && e.RetryAfterSeconds > 0 {
		return time.Duration(e.RetryAfterSeconds) * time.Second
	}
	return 0
}
