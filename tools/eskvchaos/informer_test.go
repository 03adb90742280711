package main

import (
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// The informer's checks: after a listing, a key's events must carry
// its next versions (a key the listing did not hold starts anywhere);
// at the end its cache is compared with the projection, entries past
// their expiry aside.
func TestInformerChecks(t *testing.T) {
	const p = "tenant/a/project/p/"
	r := &informer{prefix: p, partition: 1}
	r.replace(client.Change{Type: client.ChangeSnapshot, Position: "p1.o10",
		Snapshot: []contract.Entry{{Key: p + "a", Version: 3}, {Key: p + "b", Version: 1}}})
	ev := func(cursor, key string, v int64, kind contract.Kind) contract.WatchEvent {
		return contract.WatchEvent{Cursor: cursor, Key: p + key, Version: v, Kind: kind}
	}
	for _, e := range []contract.WatchEvent{
		ev("p1.o11", "a", 4, contract.KindPut),
		ev("p1.o12", "c", 7, contract.KindPut),    // not listed: any version
		ev("p1.o13", "a", 4, contract.KindPut),    // again: a duplicate
		ev("p1.o14", "b", 3, contract.KindDelete), // version 2 skipped: a gap
		ev("p1.o15", "c", 8, contract.KindPut),
	} {
		r.apply(e)
	}
	if len(r.dups) != 1 || len(r.gaps) != 1 || r.last.Offset != 15 {
		t.Fatalf("duplicates %q, gaps %q, last %s", r.dups, r.gaps, r.last)
	}
	past := time.Now().Add(-time.Second)
	r.cache[p+"gone"] = cachedEntry{version: 2, expiresAt: &past}
	var f informerFindings
	f.compare(p, r.cache, map[string]int64{p + "a": 4, p + "c": 8}, time.Now())
	if f.differing != 0 || f.keys != 2 {
		t.Fatalf("%+v", f)
	}
	f.compare(p, r.cache, map[string]int64{p + "a": 5, p + "d": 1}, time.Now())
	if f.differing != 3 {
		t.Fatalf("%+v", f)
	}
}
