package elemkey

import (
	"sort"
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestQueueMemberOrder: members sort in byte order as (incarnation,
// priority, push version), for every priority sign, and parse back; an
// incarnation's members lie in its QueueRange and no other's.
func TestQueueMemberOrder(t *testing.T) {
	type item struct{ since, prio, version int64 }
	items := []item{{1, 0, 5}, {1, -1, 9}, {1, -contract.MaxPriority, 12}, {1, contract.MaxPriority, 2}, {1, 0, 3}, {2, -5, 20}, {16, 0, 16}, {1, 1, 4}}
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

func TestListPosition(t *testing.T) {
	ps := []int64{-1 << 63, -1 << 40, -2, -1, 0, 1, 2, 999, 1 << 40, 1<<63 - 1}
	for i, p := range ps {
		m := ListPosition(p)
		if len(m) != 20 {
			t.Fatalf("ListPosition(%d) = %q, not 20 bytes", p, m)
		}
		if back, err := parseListPosition(m); err != nil || back != p {
			t.Fatalf("parseListPosition(%q) = %d, %v; want %d", m, back, err, p)
		}
		if i > 0 && ListPosition(ps[i-1]) >= m {
			t.Fatalf("ListPosition(%d) = %q sorts before ListPosition(%d) = %q", p, m, ps[i-1], ListPosition(ps[i-1]))
		}
	}
	for _, bad := range []string{"", "123", "9999999999999999999x", "99999999999999999999"} {
		if _, err := parseListPosition(bad); err == nil {
			t.Errorf("parseListPosition(%q) accepted", bad)
		}
	}
}

func TestListRange(t *testing.T) {
	for _, tc := range []struct {
		start, stop, size, from, to int64
		ok                          bool
	}{
		{0, 99, 1000, 0, 99, true},
		{0, 999, 500, 0, 499, true},
		{0, -1, 5, 0, 4, true},
		{-2, -1, 5, 3, 4, true},
		{-100, 1, 5, 0, 1, true},
		{3, 1, 5, 0, 0, false},
		{5, 9, 5, 0, 0, false},
		{0, -1, 0, 0, 0, false},
		{0, -6, 5, 0, 0, false},
		{2, 2, 5, 2, 2, true},
	} {
		from, to, ok := ListRange(tc.start, tc.stop, tc.size)
		if ok != tc.ok || (ok && (from != tc.from || to != tc.to)) {
			t.Errorf("ListRange(%d, %d, %d) = %d, %d, %v; want %d, %d, %v", tc.start, tc.stop, tc.size, from, to, ok, tc.from, tc.to, tc.ok)
		}
	}
}

// TestReceiptItemAgreesWithQueueMember: a receipt's item part, whose
// syntax the contract checks for clients (contract.ParseReceipt), is
// accepted exactly when ParseQueueMember accepts it.
func TestReceiptItemAgreesWithQueueMember(t *testing.T) {
	members := []string{QueueMember(1, 0, 1), QueueMember(3, -2, 7), QueueMember(1, contract.MaxPriority, 1<<62),
		QueueMember(1<<63-1, -contract.MaxPriority, 1<<63-1), QueueMember(0, 0, 5), QueueMember(-1, 0, 5), QueueMember(5, 0, 4),
		QueueMember(5, 0, -1), "", "x", "0000000000000001.8000000000000000", "0000000000000001.8000000000000000.000000000000000G",
		"0000000000000001.8000000000000000.000000000000000A", "0000000000000002.8000000000000000.0000000000000001",
		"0000000000000001-8000000000000000.0000000000000001", "0000000000000001.8000000000000000.00000000000000001"}
	for _, m := range members {
		_, _, _, perr := ParseQueueMember(m)
		_, _, _, rerr := contract.ParseReceipt(m + "#1")
		if (perr == nil) != (rerr == nil) {
			t.Errorf("%q: ParseQueueMember %v, ParseReceipt %v", m, perr, rerr)
		}
	}
}
