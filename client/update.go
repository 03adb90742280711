package client

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/eskv/eskv/contract"
)

// UpdateFunc computes a key's next value from its current entry, nil when
// the key is absent (never written, deleted or expired). Update calls it
// once per attempt, each time with the entry as it is then, so it should
// compute and not act: anything it does besides returning a value happens
// once per attempt. An error it returns ends Update, which returns that
// error as is and writes nothing.
type UpdateFunc func(current *contract.Entry) (next json.RawMessage, err error)

// UpdateOptions qualify the writes of an Update.
type UpdateOptions struct {
	// TTL expires the entry this long after the update, in whole seconds;
	// 0 keeps the entry's expiry (keepTtl).
	TTL time.Duration
	// Semantics, when set, replace the entry's; otherwise it keeps its
	// own (a new key gets purpose "other").
	Semantics contract.Semantics
	// RequestID names the update, in at most 120 characters; attempt n
	// writes with requestId "<RequestID>-<n>" (default: a random
	// RequestID per Update). So a
	// transient retry of one attempt repeats its requestId and is answered
	// as a replay if it had been applied, and the attempt after a conflict
	// is a new request. Give a stable RequestID to run an update again
	// (after a crash, by a job's retry) without applying it twice: when
	// the key's current entry was written by an attempt of the same
	// RequestID, Update answers it with Replayed set and writes nothing.
	RequestID string
	// SpecRef references the spec or decision record the write follows.
	SpecRef string
	// DeadLetter, when set, is the key of an eskv queue an escalated
	// update is handed to: when Update escalates (*EscalationError: the
	// conflict schedule or the transient tries ran out, or
	// ErrOutcomeUnknown), it pushes one DeadLetter item there, with its
	// last write's requestId as the push's, and returns the escalation
	// with EscalationError.DeadLetter set. A triage worker pops the
	// queue. Fatal errors, fn's errors and the end of ctx are not
	// escalations: nothing is pushed. When the push fails, the error
	// joins the escalation and the push's error. Update then needs the
	// right to write the queue too.
	DeadLetter string
	// DeadLetterValue puts the value the update last computed in the
	// DeadLetter item (by default it holds none: the queue's readers may
	// be others than the key's).
	DeadLetterValue bool
}

// UpdateResult is the answer of an Update.
type UpdateResult struct {
	// Entry is the key's entry after the update.
	Entry contract.Entry
	// Attempts counts the read-modify-write rounds: 1 when no other
	// writer came in between.
	Attempts int
	// Replayed is true when the update had been applied already (see
	// UpdateOptions.RequestID): nothing new was written.
	Replayed bool
}

// Update is a read-modify-write of key that never loses another writer's
// change: it reads the key, calls fn with its entry, and writes fn's value
// with expectedVersion set to the version read (0 when the key is absent).
// When another writer got there first (version_conflict), it waits by the
// policy's conflict schedule (1 s, 2 s, 4 s … 32 s by default), reads
// again and calls fn again; after the last wait's attempt it escalates:
// the error is an *EscalationError with the attempts, whose Err is the
// last conflict. Transient errors of each read and write are retried as
// any call's (the write carries a requestId, see UpdateOptions); fatal
// errors, and a requestId conflict, end it at once. A write whose outcome
// is unknown when another writer has come after it is not redone: Update
// escalates with ErrOutcomeUnknown rather than risk applying the change
// twice.
//
// Update needs the rights to read and to write key.
func (c *Client) Update(ctx context.Context, key string, fn UpdateFunc, o UpdateOptions) (UpdateResult, error) {
	ttl, err := ttlSeconds(o.TTL)
	if err != nil {
		return UpdateResult{}, err
	}
	if len(o.RequestID) > maxUpdateIDLen {
		return UpdateResult{}, contract.FieldErrorf(contract.EInvalid, "requestId", "an update's requestId is at most %d characters (Update adds -N)", maxUpdateIDLen)
	}
	base := o.RequestID
	if base == "" {
		base = "update-" + rand.Text()
	}
	var (
		res       UpdateResult
		lastValue json.RawMessage // what the last attempt that called fn computed
	)
	conflict := func(err error) bool { return Classify(err) == ClassConflict }
	err = c.policy.retrying(ctx, c.policy.conflict(), conflict, func(ctx context.Context, attempt int) error {
		res.Attempts = attempt
		cur, err := c.Get(ctx, key)
		var current *contract.Entry
		switch {
		case err == nil:
			current = &cur
		case contract.ErrorCode(err) != contract.ENotFound:
			return err
		}
		if current != nil && o.RequestID != "" && attemptOf(current.RequestID, base) {
			res.Entry, res.Replayed = cur, true
			return nil
		}
		next, err := fn(current)
		if err != nil {
			return &fnError{err}
		}
		lastValue = next
		b := contract.PutBody{Value: next, ExpectedVersion: new(int64), TTLSeconds: ttl, KeepTTL: ttl == nil && o.Semantics.TTLSeconds == 0,
			Semantics: semantics(o.Semantics), RequestID: base + "-" + strconv.Itoa(attempt), SpecRef: o.SpecRef}
		if current != nil {
			*b.ExpectedVersion = current.Version
		}
		if b.Value == nil {
			b.Value = json.RawMessage("null")
		}
		if !json.Valid(b.Value) {
			return contract.FieldErrorf(contract.EInvalid, "value", "the update's value is not valid JSON")
		}
		// The write's own transient retries repeat its requestId. One
		// that failed without an answer may have been applied; if a
		// later try then meets a conflict, another writer came after
		// it, and applying fn again could apply the change twice.
		w, unsure := *c, false
		w.policy.OnRetry = func(err error, attempt int, wait time.Duration) {
			unsure = true
			if c.policy.OnRetry != nil {
				c.policy.OnRetry(err, attempt, wait)
			}
		}
		put, err := w.writeEntry(ctx, http.MethodPut, key, &b, true)
		if unsure && Classify(err) == ClassConflict {
			return &EscalationError{Attempts: attempt, Err: fmt.Errorf("%w: write %s: %w", ErrOutcomeUnknown, b.RequestID, err)}
		}
		res.Entry, res.Replayed = put.Entry, put.Replayed
		return err
	})
	var fe *fnError
	if errors.As(err, &fe) {
		return UpdateResult{}, fe.err
	}
	var esc *EscalationError
	if errors.As(err, &esc) && o.DeadLetter != "" {
		return UpdateResult{}, c.escalate(ctx, o, esc,
			DeadLetter{Key: key, RequestID: base + "-" + strconv.Itoa(res.Attempts), Attempts: res.Attempts, Value: lastValue})
	}
	if err != nil {
		return UpdateResult{}, err
	}
	return res, nil
}

// ErrOutcomeUnknown marks an Update that stopped because it cannot tell
// whether its last write was applied: a try of it got no answer (or a
// 503), and its retry met a version conflict, so another writer came
// after it. It is always inside an *EscalationError: look at the key
// (its history, or the requestId of its entry) before running the
// update again.
var ErrOutcomeUnknown = errors.New("client: the update's write may have been applied")

// maxUpdateIDLen leaves room in a requestId for "-N", N up to 7 digits.
const maxUpdateIDLen = contract.MaxRequestIDLen - 8

// fnError carries the UpdateFunc's own error through the retry loop, so
// that it is never classified (fn could return a conflict of another
// key).
type fnError struct{ err error }

func (e *fnError) Error() string { return e.err.Error() }

// attemptOf reports whether requestID is an attempt of the update named
// base: base, "-", digits.
func attemptOf(requestID, base string) bool {
	n, ok := strings.CutPrefix(requestID, base+"-")
	if !ok || n == "" {
		return false
	}
	for _, r := range n {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
