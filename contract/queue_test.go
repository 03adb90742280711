package contract

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestReceipt: a receipt names one delivery of one item and its random
// nonce (or none, for a delivery popped before receipts had one);
// anything else is 400 on field receipt.
func TestReceipt(t *testing.T) {
	m := "0000000000000003.7ffffffffffffffe.0000000000000007" // elemkey.QueueMember(3, -2, 7)
	nonce := "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name, nonce, receipt string
	}{
		{"OKWithNonce", nonce, m + "#12#" + nonce},
		{"OKBeforeNonces", "", m + "#12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Receipt(m, 12, tc.nonce)
			got, n, gotNonce, err := ParseReceipt(r)
			if r != tc.receipt || err != nil || got != m || n != 12 || gotNonce != tc.nonce {
				t.Fatalf("Receipt = %q, ParseReceipt = %s %d %q %v", r, got, n, gotNonce, err)
			}
		})
	}
	for _, bad := range []string{m, m + "#", m + "#0", m + "#-1", m + "#01", m + "#1#2", "item#1", "#1", m + "# 1",
		m + "#1#", m + "#1#" + strings.ToUpper(nonce), m + "#1#" + nonce + "0", m + "#1#" + nonce[1:], m + "#1#" + nonce + "#1",
		m + "#1#" + nonce[:31] + "g"} {
		_, _, _, err := ParseReceipt(bad)
		var e *Error
		if !errors.As(err, &e) || e.Code != EInvalid || e.Field != "receipt" {
			t.Errorf("ParseReceipt(%q) = %v, want invalid on receipt", bad, err)
		}
	}
}

// TestErrorIsSentinel: errors.Is matches an error of a code with its
// sentinel, whatever its message, through wrapping; never another code.
func TestErrorIsSentinel(t *testing.T) {
	err := fmt.Errorf("pop: %w", FieldErrorf(EQueueEmpty, "key", "queue x is empty"))
	if !errors.Is(err, ErrQueueEmpty) || errors.Is(err, ErrStaleReceipt) {
		t.Fatalf("errors.Is on %v", err)
	}
	if errors.Is(Errorf(EConflict, "x"), &Error{Code: EConflict, Message: "other"}) {
		t.Fatal("an error with a message is not a sentinel")
	}
	if got := slices.Index([]string{EQueueEmpty, EStaleReceipt}, ErrorCode(ErrStaleReceipt)); got != 1 {
		t.Fatal("sentinel code")
	}
}
