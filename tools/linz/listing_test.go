package linz

import (
	"strings"
	"testing"
)

const lp = "tenant/chaos/project/p0/"

func put(key string, call, ret int64, out Outcome, v int64) Change {
	return Change{Key: lp + key, Call: call, Return: ret, Outcome: out, Version: v}
}

func del(key string, call, ret int64, out Outcome, v int64) Change {
	c := put(key, call, ret, out, v)
	c.Delete = true
	return c
}

func list(call, ret int64, items map[string]int64) Listing {
	full := map[string]int64{}
	for k, v := range items {
		full[lp+k] = v
	}
	return Listing{Prefix: lp, Call: call, Return: ret, Items: full}
}

// match marks c's value as matching the filter of scan.
func match(c Change) Change {
	c.Matches = []string{"f"}
	return c
}

// scan is list filtered by "f".
func scan(call, ret int64, items map[string]int64) Listing {
	l := list(call, ret, items)
	l.Filter = "f"
	return l
}

// TestCheckListings: a listing must hold every key whose latest write
// acknowledged before it began is a put, none whose latest is a delete,
// unless a possibly concurrent write explains the difference; and never a
// version older than acknowledged, or one no put could have written yet.
func TestCheckListings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changes []Change
		listing Listing
		broken  string // a part of the violation; "" when none
	}{
		{"OKAckedPutListed", []Change{put("a", 0, 1, OK, 1)}, list(2, 3, map[string]int64{"a": 1}), ""},
		{"ErrAckedPutMissing", []Change{put("a", 0, 1, OK, 1)}, list(2, 3, nil), "a missing: put v1"},
		{"OKPutConcurrentNotYetListed", []Change{put("a", 0, 5, OK, 1)}, list(2, 3, nil), ""},
		{"OKPutConcurrentListed", []Change{put("a", 0, 5, OK, 1)}, list(2, 3, map[string]int64{"a": 1}), ""},
		{"OKConcurrentDeleteHides", []Change{put("a", 0, 1, OK, 1), del("a", 2, 9, OK, 2)}, list(3, 4, nil), ""},
		{"OKUnknownDeleteHides", []Change{put("a", 0, 1, OK, 1), del("a", 1, 2, Unknown, 0)}, list(3, 4, nil), ""},
		{"ErrDeleteAfterListingDoesNotHide", []Change{put("a", 0, 1, OK, 1), del("a", 5, 6, OK, 2)}, list(2, 3, nil), "a missing"},
		{"OKAckedDeleteNotListed", []Change{put("a", 0, 1, OK, 1), del("a", 2, 3, OK, 2)}, list(4, 5, nil), ""},
		{"ErrAckedDeleteListed", []Change{put("a", 0, 1, OK, 1), del("a", 2, 3, OK, 2)}, list(4, 5, map[string]int64{"a": 1}), "its delete v2"},
		{"OKConcurrentPutRecreates", []Change{put("a", 0, 1, OK, 1), del("a", 2, 3, OK, 2), put("a", 4, 9, OK, 3)}, list(5, 6, map[string]int64{"a": 3}), ""},
		{"ErrStaleVersion", []Change{put("a", 0, 1, OK, 1), put("a", 2, 3, OK, 2)}, list(4, 5, map[string]int64{"a": 1}), "older than v2"},
		{"ErrVersionFromTheFuture", []Change{put("a", 0, 1, OK, 1), put("a", 6, 7, OK, 2)}, list(4, 5, map[string]int64{"a": 2}), "could have written"},
		{"ErrNeverWritten", nil, list(4, 5, map[string]int64{"ghost": 1}), "ghost listed at v1"},
		{"OKUnknownPutListed", []Change{put("a", 0, 1, Unknown, 0)}, list(4, 5, map[string]int64{"a": 1}), ""},
		{"ErrOtherPrefix", nil, Listing{Prefix: lp, Call: 1, Return: 2, Items: map[string]int64{"tenant/chaos/project/p1/a": 1}}, "not under the prefix"},
		{"OKOtherPrefixIgnored", []Change{{Key: "tenant/chaos/project/p1/a", Call: 0, Return: 1, Outcome: OK, Version: 1}}, list(2, 3, nil), ""},
		{"OKFailedIgnored", []Change{put("a", 0, 1, Failed, 0)}, list(2, 3, nil), ""},
		{"OKScanListsMatch", []Change{match(put("a", 0, 1, OK, 1))}, scan(2, 3, map[string]int64{"a": 1}), ""},
		{"ErrScanMissesMatch", []Change{put("a", 0, 1, OK, 1), match(put("a", 2, 3, OK, 2))}, scan(4, 5, nil), "a missing: put v2"},
		{"OKScanLeavesOutNoMatch", []Change{match(put("a", 0, 1, OK, 1)), put("a", 2, 3, OK, 2)}, scan(4, 5, nil), ""},
		{"ErrScanListsNoMatch", []Change{match(put("a", 0, 1, OK, 1)), put("a", 2, 3, OK, 2)}, scan(4, 5, map[string]int64{"a": 2}), "a listed at v2"},
		{"ErrScanListsOldMatch", []Change{match(put("a", 0, 1, OK, 1)), put("a", 2, 3, OK, 2)}, scan(4, 5, map[string]int64{"a": 1}), "its delete v2"},
		{"OKScanConcurrentNoMatch", []Change{match(put("a", 0, 1, OK, 1)), put("a", 2, 9, OK, 2)}, scan(4, 5, map[string]int64{"a": 1}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := CheckListings(tc.changes, []Listing{tc.listing})
			switch {
			case tc.broken == "" && len(r.Violations) > 0:
				t.Fatalf("violations %q; want none", r.Violations)
			case tc.broken != "" && (len(r.Violations) != 1 || !strings.Contains(r.Violations[0], tc.broken)):
				t.Fatalf("violations %q; want one saying %q", r.Violations, tc.broken)
			}
		})
	}
}

// TestChanges: the register history's writes are puts; conflicts and
// failed writes had no effect.
func TestChanges(t *testing.T) {
	h := []Op{
		read(0, k1, 0, 1, notFound),
		write(0, k1, 0, "a", 2, 3, ok(1, "a")),
		write(1, k1, 0, "b", 2, 4, conflict(1, "a")),
		write(1, k1, 1, "c", 5, 6, unknown),
		write(1, k1, 1, "d", 5, 6, failed),
	}
	got := Changes(h)
	if len(got) != 2 || got[0].Version != 1 || got[0].Outcome != OK || got[1].Outcome != Unknown || got[0].Delete || got[1].Call != 5 {
		t.Fatalf("changes %+v", got)
	}
}
