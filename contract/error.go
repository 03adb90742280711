package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Error codes. They are part of the API: clients switch on them, so they
// never change meaning.
const (
	EInvalid         = "invalid"
	ETooLarge        = "value_too_large"
	ENotFound        = "not_found"
	EConflict        = "version_conflict"
	ELockHeld        = "lock_held"
	ENotLockHolder   = "not_lock_holder"
	ENotLeader       = "not_leader"
	EWrongType       = "wrong_type"
	EFieldMismatch   = "field_mismatch"
	EOutOfRange      = "out_of_range"
	EQueueEmpty      = "queue_empty"   // qpop of an empty or missing queue (HTTP 404)
	EStaleReceipt    = "stale_receipt" // qack of a receipt that is not the item's current delivery (409)
	EUnauthenticated = "unauthenticated"
	EForbidden       = "forbidden"
	EUnavailable     = "partition_unavailable"
	// EOutcomeUnknown: a write was handed to its partition but not
	// answered within the server's request deadline, or its Kafka
	// transaction failed without saying whether it committed: it may
	// have been applied, or may still be. RequestID names the requestId
	// to retry it with (the write's own; none when it carried none): the
	// retry is applied once at most. HTTP 503 with Retry-After.
	EOutcomeUnknown = "outcome_unknown"
	// EForwardLoop: forwarding the request would come back to the writer
	// that received it (a writer's advertise URL is wrong). Transient for
	// a client (another writer may answer); an operator's problem.
	EForwardLoop = "forward_loop"
	EInternal    = "internal"

	// Codes of requests that reach no operation.
	EMethodNotAllowed     = "method_not_allowed"
	EUnsupportedMediaType = "unsupported_media_type"

	// Codes of watches (GET /v1/watch).
	//
	// ECursorExpired: the log no longer holds the events after the
	// cursor (compaction or retention moved its start past it), or the
	// key's history no longer holds the version asked for. The client
	// re-lists and watches from now. HTTP 410.
	ECursorExpired = "cursor_expired"
	// ESnapshotExpired: a later page of a listing answers as of the
	// position of its first page (the cursor carries it), and the
	// projection's history (kv_history, under the projector's
	// retention) no longer holds the state some key had there. The
	// client lists again from the first page. HTTP 410.
	ESnapshotExpired = "snapshot_expired"
	// ETooManyWatches: the writer serves as many watches as it may
	// (ESKV_MAX_WATCHES); another writer or a later try may. HTTP 503
	// with Retry-After.
	ETooManyWatches = "too_many_watches"
	// ESlowConsumer ends a watch whose client read too slowly: its
	// buffer filled. It is never an HTTP status, only the code of the
	// SSE event "error" that ends the stream, which carries the cursor
	// of the last event sent; resuming after it loses nothing.
	ESlowConsumer = "slow_consumer"

	// ETooManyRequests: the request would take more than its principal's
	// share (or its remote address's, before authentication) of a shared
	// slot of the writer — listings, scans, histories, watches, in-flight
	// body bytes, connections — or of a global bound. HTTP 429 with
	// Retry-After; Field names the limit (its setting).
	ETooManyRequests = "too_many_requests"
)

// Error is the one error type every layer speaks. Field names the request
// field at fault, when there is one. Current carries the state a
// version_conflict was decided against.
type Error struct {
	Code    string
	Message string
	Field   string
	// Current is set on version_conflict, field_mismatch, lock_held,
	// not_lock_holder, not_leader and wrong_type: the entry as it is now
	// (nil when the key does not exist).
	Current *Entry
	// CorrelationID ties a version_conflict answer to its WARN log line and
	// its kv.conflicts record.
	CorrelationID string
	// RetryAfterSeconds is set on partition_unavailable and
	// outcome_unknown.
	RetryAfterSeconds int
	// RequestID is set on outcome_unknown: the requestId to retry the
	// write with (empty when the write carried none).
	RequestID string
	// FailedOp is set on an error about one operation of a transaction
	// (POST /v1/txn): its index in ops, from 0. Field then starts with
	// ops[FailedOp], and Current is that op's key's entry.
	FailedOp *int
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (field %s)", e.Code, e.Message, e.Field)
	}
	return e.Code + ": " + e.Message
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf returns an *Error naming the request field at fault.
func FieldErrorf(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// EInternal for any other non-nil error.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorBody is the JSON of every error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail describes an error; Code is stable and machine-readable.
type ErrorDetail struct {
	Code              string          `json:"code"`
	Message           string          `json:"message"`
	Field             string          `json:"field,omitempty"`
	CurrentVersion    *int64          `json:"currentVersion,omitempty"`
	CurrentValue      json.RawMessage `json:"currentValue,omitempty"`
	CurrentExpiresAt  *time.Time      `json:"currentExpiresAt,omitempty"`
	CorrelationID     string          `json:"correlationId,omitempty"`
	RetryAfterSeconds int             `json:"retryAfterSeconds,omitempty"`
	RequestID         string          `json:"requestId,omitempty"`
	FailedOp          *int            `json:"failedOp,omitempty"`
}

// Detail is e as an error answer says it. The current entry is told on
// version_conflict and field_mismatch always (version 0 and value null
// when the key is absent), and on any other code that has one.
func (e *Error) Detail() ErrorDetail {
	d := ErrorDetail{Code: e.Code, Message: e.Message, Field: e.Field, CorrelationID: e.CorrelationID,
		RetryAfterSeconds: e.RetryAfterSeconds, RequestID: e.RequestID, FailedOp: e.FailedOp}
	if e.Current != nil || e.Code == EConflict || e.Code == EFieldMismatch {
		var v int64
		d.CurrentValue = json.RawMessage("null")
		if e.Current != nil {
			v, d.CurrentValue, d.CurrentExpiresAt = e.Current.Version, e.Current.Value, e.Current.ExpiresAt
		}
		d.CurrentVersion = &v
	}
	return d
}

// AsError is the *Error an error answer about key describes: Current is
// set when the answer names a current version (> 0).
func (d *ErrorDetail) AsError(key string) *Error {
	e := &Error{Code: d.Code, Message: d.Message, Field: d.Field, CorrelationID: d.CorrelationID, RetryAfterSeconds: d.RetryAfterSeconds,
		RequestID: d.RequestID, FailedOp: d.FailedOp}
	if d.CurrentVersion != nil && *d.CurrentVersion > 0 {
		e.Current = &Entry{Key: key, Version: *d.CurrentVersion, Value: d.CurrentValue, ExpiresAt: d.CurrentExpiresAt}
	}
	return e
}

// Is makes errors.Is(err, target) hold for a target that is a sentinel
// of a code (an *Error with only Code set, such as ErrQueueEmpty) and an
// error of that code, whatever its message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Field == "" && t.Current == nil && t.Code == e.Code
}

// Sentinels of codes callers branch on: errors.Is(err, ErrQueueEmpty).
var (
	ErrQueueEmpty   = &Error{Code: EQueueEmpty}
	ErrStaleReceipt = &Error{Code: EStaleReceipt}
)

// ETooManyKeys: a range delete whose prefix holds more keys than one
// atomic delete takes (MaxRangeKeys) and that did not ask for the chunked
// mode; nothing was deleted. HTTP 409.
const ETooManyKeys = "too_many_keys"
