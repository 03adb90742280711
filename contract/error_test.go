package contract

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestErrorCode(t *testing.T) {
	conflict := &Error{Code: EConflict, Message: "version is 3, expected 2"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"OKNil", nil, ""},
		{"OKError", conflict, EConflict},
		{"OKErrorf", Errorf(ENotFound, "key %s not found", "tenant/a/project/b/c"), ENotFound},
		{"OKFieldErrorf", FieldErrorf(EInvalid, "key", "bad"), EInvalid},
		{"OKWrapped", fmt.Errorf("put: %w", conflict), EConflict},
		{"OKWrappedTwice", fmt.Errorf("handler: %w", fmt.Errorf("writer: %w", Errorf(EUnavailable, "partition 3 is catching up"))), EUnavailable},
		{"OKJoined", errors.Join(io.EOF, Errorf(ELockHeld, "held by w1")), ELockHeld},
		{"OKFirstInChain", fmt.Errorf("%w", fmt.Errorf("outer: %w", &Error{Code: EForbidden, Message: "no"})), EForbidden},
		{"InternalPlainError", errors.New("boom"), EInternal},
		{"InternalWrappedPlainError", fmt.Errorf("query: %w", io.ErrUnexpectedEOF), EInternal},
		{"InternalFormattedWithV", fmt.Errorf("lost: %v", conflict), EInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ErrorCode(tt.err); got != tt.want {
				t.Errorf("ErrorCode(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"WithoutField", Errorf(ENotFound, "key %q not found", "k"), `not_found: key "k" not found`},
		{"WithField", FieldErrorf(EInvalid, "key", "uppercase letters are not allowed"), "invalid: uppercase letters are not allowed (field key)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFieldErrorf(t *testing.T) {
	e := FieldErrorf(ETooLarge, "value", "value is %d bytes", 70000)
	if e.Code != ETooLarge || e.Field != "value" || e.Message != "value is 70000 bytes" {
		t.Errorf("FieldErrorf = %+v", e)
	}
}
