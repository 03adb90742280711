package changelog_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/testenv"
)

// TestReadCommittedStopsExactlyAtEnd: committed records are read in order,
// aborted ones are skipped, and the read ends at the last stable offset
// even when the offsets below it are an aborted transaction and its marker
// (a kgo consumer never reports having passed those).
func TestReadCommittedStopsExactlyAtEnd(t *testing.T) {
	b := testenv.MustBroker(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := testenv.MustProducer(t, b)
	txn := func(commit bool, vals ...string) {
		t.Helper()
		rs := make([]*kgo.Record, len(vals))
		for i, v := range vals {
			rs[i] = &kgo.Record{Topic: b.Topics.Changes, Partition: 0, Value: []byte(v)}
		}
		prod.Txn(t, commit, rs...)
	}
	txn(true, "a", "b")
	txn(false, "x")
	txn(true, "c")
	txn(false, "y", "z") // the tail: aborted records, then the abort marker

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end, err := changelog.LastStableOffset(ctx, cl, b.Topics.Changes, 0)
	if err != nil {
		t.Fatal(err)
	}
	read := func(from int64) []string {
		var got []string
		err := changelog.ReadCommitted(ctx, cl, changelog.Range{Topic: b.Topics.Changes, Partition: 0, From: from, End: end}, func(r *kgo.Record) error {
			got = append(got, fmt.Sprintf("%s@%d", r.Value, r.Offset))
			return nil
		})
		if err != nil {
			t.Fatalf("read from %d: %v", from, err)
		}
		return got
	}
	// Offsets: a0 b1 marker2 x3 marker4 c5 marker6 y7 z8 marker9; end 10.
	if end != 10 {
		t.Fatalf("last stable offset %d, want 10", end)
	}
	if got, want := read(0), []string{"a@0", "b@1", "c@5"}; !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	if got, want := read(2), []string{"c@5"}; !slices.Equal(got, want) {
		t.Fatalf("read from 2: %v, want %v", got, want)
	}
	if got := read(end); len(got) != 0 {
		t.Fatalf("read from the end: %v", got)
	}
}
