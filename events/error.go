package events

import (
	"errors"
	"fmt"
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
	EUnauthenticated = "unauthenticated"
	EForbidden       = "forbidden"
	EUnavailable     = "partition_unavailable"
	EInternal        = "internal"
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
	// RetryAfterSeconds is set on partition_unavailable.
	RetryAfterSeconds int
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
