package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/eskv/eskv/contract"
)

// DeadLetter is the item an escalated Update hands to the queue its
// UpdateOptions.DeadLetter names (the seed's open question "dead letter
// queues for repeated conflicts"): what a triage worker, which pops the
// queue, needs to look at the key and decide. It holds the value the
// update last computed only when UpdateOptions.DeadLetterValue asked
// for it: a queue's readers may be others than the key's.
type DeadLetter struct {
	// Key is the updated key.
	Key string `json:"key"`
	// RequestID is the requestId of the update's last write attempt
	// (UpdateOptions.RequestID, "-", the attempt), also the push's: a
	// retried push is answered as a replay, never pushed twice.
	RequestID string `json:"requestId"`
	// Attempts counts the update's read-modify-write rounds.
	Attempts int `json:"attempts"`
	// LastError is the error the update escalated with.
	LastError DeadLetterError `json:"lastError"`
	// EscalatedAt is when the client gave up, by its clock (UTC).
	EscalatedAt time.Time `json:"escalatedAt"`
	// Directive is the directive the update's writes were made for
	// (WithDirective, DirectiveContext), when the client named one.
	Directive string `json:"directive,omitempty"`
	// Value is the value the update last computed and could not write,
	// only with UpdateOptions.DeadLetterValue.
	Value json.RawMessage `json:"value,omitempty"`
}

// DeadLetterError is a DeadLetter's last error: its code
// (contract.ErrorCode: version_conflict, partition_unavailable,
// internal for an error that is not eskv's) and message.
type DeadLetterError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// lastErrorOf is the DeadLetterError of an escalation: its last try's
// error.
func lastErrorOf(esc *EscalationError) DeadLetterError {
	var last error = esc
	if esc.Err != nil {
		last = esc.Err
	}
	d := DeadLetterError{Code: contract.ErrorCode(last), Message: last.Error()}
	var e *contract.Error
	if errors.As(last, &e) {
		d.Message = e.Message
	}
	return d
}

// escalate hands an update that escalated with esc to the dead-letter
// queue o.DeadLetter: d (its key, last write's requestId, attempts and
// last computed value, kept only when o.DeadLetterValue asks for it)
// completed with the last error, the time and the directive. It returns
// esc naming the queue, or esc joined with the push's error.
func (c *Client) escalate(ctx context.Context, o UpdateOptions, esc *EscalationError, d DeadLetter) error {
	if !o.DeadLetterValue {
		d.Value = nil
	}
	d.LastError, d.EscalatedAt, d.Directive = lastErrorOf(esc), time.Now().UTC(), c.directiveOf(ctx)
	if err := c.deadLetter(ctx, o.DeadLetter, d); err != nil {
		return errors.Join(esc, err)
	}
	esc.DeadLetter = o.DeadLetter
	return esc
}

// deadLetter pushes d onto queue with d's requestId. A queue that took
// this requestId already (the same update run again with a stable
// UpdateOptions.RequestID, escalating at the same attempt) answers 409
// on field requestId: the item is there, and nothing more is pushed.
func (c *Client) deadLetter(ctx context.Context, queue string, d DeadLetter) error {
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("client: encode dead letter of %s: %w", d.Key, err)
	}
	_, err = c.QPush(ctx, QPushRequest{Key: queue, Data: data, RequestID: d.RequestID})
	var e *contract.Error
	if errors.As(err, &e) && e.Code == contract.EConflict && e.Field == "requestId" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("client: dead-letter the update of %s to %s: %w", d.Key, queue, err)
	}
	return nil
}
