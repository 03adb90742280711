package linz

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// Registers under one project, and a key of another beside them.
const ra, rb, other = "tenant/chaos/project/p0/r/a", "tenant/chaos/project/p0/r/b", "tenant/chaos/project/p1/r/a"

const rprefix = "tenant/chaos/project/p0/r/"

func deleteRange(client int, prefix string, call, ret int64, out Output) Op {
	return Op{Client: client, In: Input{Key: prefix, Kind: DeleteRange}, Out: out, Call: call, Return: ret}
}

func deleted(n int) Output { return Output{Outcome: OK, Count: n} }

// TestDeleteRangeModel: a range delete deletes every live register under
// its prefix in one step and answers their count; a deleted key keeps
// its version, the next create continues it. Histories that see part of
// a range delete, a wrong count, a key read back after it or a create
// that restarts the version are caught.
func TestDeleteRangeModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    []Op
		want porcupine.CheckResult
	}{
		{"OKDeletesEveryKeyUnderThePrefix", []Op{
			write(0, ra, 0, "a", 0, 1, ok(1, "a")),
			write(0, rb, 0, "b", 2, 3, ok(1, "b")),
			write(0, other, 0, "o", 2, 3, ok(1, "o")),
			deleteRange(1, rprefix, 4, 5, deleted(2)),
			read(2, ra, 6, 7, notFound),
			read(2, rb, 6, 7, notFound),
			read(2, other, 8, 9, ok(1, "o")),
			write(0, ra, 0, "a2", 10, 11, ok(3, "a2")), // version 2 was the delete
			write(0, rb, 1, "b2", 12, 13, conflict(0, "")),
			deleteRange(1, rprefix, 14, 15, deleted(1)),
		}, porcupine.Ok},
		{"OKConcurrentReadsBeforeAndAfter", []Op{
			write(0, ra, 0, "a", 0, 1, ok(1, "a")),
			write(0, rb, 0, "b", 0, 1, ok(1, "b")),
			deleteRange(1, rprefix, 2, 10, deleted(2)),
			read(2, ra, 3, 4, ok(1, "a")), // before it took effect
			read(2, rb, 5, 6, notFound),   // after
			read(3, ra, 7, 8, notFound),
		}, porcupine.Ok},
		{"OKUnknownRangeDeleteApplied", []Op{
			write(0, ra, 0, "a", 0, 1, ok(1, "a")),
			deleteRange(1, rprefix, 2, 3, unknown),
			read(2, ra, 4, 5, notFound),
			write(2, ra, 0, "a2", 6, 7, ok(3, "a2")),
		}, porcupine.Ok},
		{"OKUnknownRangeDeleteNotApplied", []Op{
			write(0, ra, 0, "a", 0, 1, ok(1, "a")),
			deleteRange(1, rprefix, 2, 3, unknown),
			read(2, ra, 4, 5, ok(1, "a")),
		}, porcupine.Ok},
		{"OKRefusedRangeDeleteIgnored", []Op{
			write(0, ra, 0, "a", 0, 1, ok(1, "a")),
			deleteRange(1, rprefix, 2, 3, failed), // too_many_keys
			read(2, ra, 4, 5, ok(1, "a")),
		}, porcupine.Ok},
		{"IllegalPartOfARangeDelete", []Op{
			// ra is gone, then rb is still there: the delete was not atomic.
			write(0, ra, 0, "a", 0, 1, ok(1, "a")),
			write(0, rb, 0, "b", 0, 1, ok(1, "b")),
			deleteRange(1, rprefix, 2, 20, deleted(2)),
			read(2, ra, 3, 4, notFound),
			read(2, rb, 5, 6, ok(1, "b")),
		}, porcupine.Illegal},
		{"IllegalKeyReadAfterTheRangeDelete", []Op{
			write(0, ra, 0, "a", 0, 1, ok(1, "a")),
			deleteRange(1, rprefix, 2, 3, deleted(1)),
			read(2, ra, 4, 5, ok(1, "a")),
		}, porcupine.Illegal},
		{"IllegalWrongCount", []Op{
			write(0, ra, 0, "a", 0, 1, ok(1, "a")),
			write(0, rb, 0, "b", 0, 1, ok(1, "b")),
			deleteRange(1, rprefix, 2, 3, deleted(1)),
		}, porcupine.Illegal},
		{"IllegalCountOfKeysOutsideThePrefix", []Op{
			write(0, other, 0, "o", 0, 1, ok(1, "o")),
			deleteRange(1, rprefix, 2, 3, deleted(1)),
		}, porcupine.Illegal},
		{"IllegalVersionRestartsAfterDelete", []Op{
			write(0, ra, 0, "a", 0, 1, ok(1, "a")),
			deleteRange(1, rprefix, 2, 3, deleted(1)),
			write(0, ra, 0, "a2", 4, 5, ok(1, "a2")),
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Check(tc.h, 10*time.Second); got.Result != tc.want {
				t.Fatalf("got %s, want %s", got.Result, tc.want)
			}
		})
	}
}

// TestPartitionJoinsKeysOfARangeDelete: the keys under a range delete's
// prefix share its partition, and range deletes sharing a key share
// one; other keys keep a partition each.
func TestPartitionJoinsKeysOfARangeDelete(t *testing.T) {
	h := Operations([]Op{
		write(0, ra, 0, "a", 0, 1, ok(1, "a")),
		write(0, rb, 0, "b", 0, 1, ok(1, "b")),
		write(0, other, 0, "o", 0, 1, ok(1, "o")),
		deleteRange(1, rprefix+"a", 2, 3, deleted(1)),
		deleteRange(1, rprefix, 4, 5, deleted(1)),
		deleteRange(1, "tenant/chaos/project/p9/", 4, 5, deleted(0)),
	})
	parts := partition(h)
	var sizes []int
	for _, p := range parts {
		sizes = append(sizes, len(p))
	}
	if len(parts) != 3 || sizes[0] != 1 || sizes[1] != 4 || sizes[2] != 1 {
		t.Fatalf("partition sizes %v, want [1 4 1] (the empty prefix's range delete, p0's keys and range deletes, p1's key)", sizes)
	}
}
