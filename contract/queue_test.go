package contract

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestQueueMemberOrder: members sort in byte order as (incarnation,
// priority, push version), for every priority sign, and parse back; an
// incarnation's members lie in its QueueRange and no other's.
func TestQueueMemberOrder(t *testing.T) {
	type item struct{ since, prio, version int64 }
	items := []item{{1, 0, 5}, {1, -1, 9}, {1, -MaxPriority, 12}, {1, MaxPriority, 2}, {1, 0, 3}, {2, -5, 20}, {16, 0, 16}, {1, 1, 4}}
	var members []string
	for _, it := range items {
		m := QueueMember(it.since, it.prio, it.version)
		since, prio, version, err := ParseQueueMember(m)
		if err != nil || since != it.since || prio != it.prio || version != it.version {
			t.Fatalf("ParseQueueMember(%s) = %d %d %d %v, want %+v", m, since, prio, version, err, it)
		}
		from, to := QueueRange(it.since)
		if m < from || m >= to {
			t.Fatalf("%s outside its incarnation's range [%s, %s)", m, from, to)
		}
		if from2, to2 := QueueRange(it.since + 1); m >= from2 && m < to2 {
			t.Fatalf("%s inside the next incarnation's range", m)
		}
		members = append(members, m)
	}
	sort.Strings(members)
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.since != b.since {
			return a.since < b.since
		}
		if a.prio != b.prio {
			return a.prio < b.prio
		}
		return a.version < b.version
	})
	for i, it := range items {
		if want := QueueMember(it.since, it.prio, it.version); members[i] != want {
			t.Fatalf("byte order %v, want %+v first", members, it)
		}
	}
	for _, bad := range []string{"", "x", "0000000000000001.8000000000000000", "0000000000000001.8000000000000000.000000000000000G",
		"0000000000000001.8000000000000000.000000000000000A", "0000000000000002.8000000000000000.0000000000000001"} {
		if _, _, _, err := ParseQueueMember(bad); err == nil {
			t.Errorf("ParseQueueMember(%q) accepted", bad)
		}
	}
}

// TestReceipt: a receipt names one delivery of one item and its random
// nonce (or none, for a delivery popped before receipts had one);
// anything else is 400 on field receipt.
func TestReceipt(t *testing.T) {
	m := QueueMember(3, -2, 7)
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
