package main

import (
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/tools/linz"
)

// readPathsLog is a partition 3 of the log: the register and a listing key
// of project p0 interleaved with a sibling project's key (p00: its prefix
// starts with p0 but not with p0/) and another project's.
func readPathsLog() []logcheck.Event {
	ev := func(off int64, key string, v int64, value string) logcheck.Event {
		e := contract.Event{Key: key, Version: v, Kind: contract.KindPut, After: mustJSON(value)}
		if value == "" {
			e.Kind, e.After = contract.KindDelete, nil
		}
		return logcheck.Event{Partition: 3, Offset: off, Event: e}
	}
	const reg, l0, sib, other = "tenant/chaos/project/p0/reg", "tenant/chaos/project/p0/l/0", "tenant/chaos/project/p00/reg", "tenant/chaos/project/p9/reg"
	return []logcheck.Event{
		ev(0, reg, 1, "c0-0"), ev(1, sib, 1, "x"), ev(2, l0, 1, "c1-0"), ev(3, reg, 2, "c0-1"),
		ev(4, other, 1, "y"), ev(5, l0, 2, ""), ev(6, reg, 3, "c2-5"),
	}
}

// TestWatchCheck: the watch check accepts exactly the log's records of the
// prefix after the start, and names a gap, a duplicate, a record of
// another prefix, one out of order, a wrong key or version, an
// acknowledged write not received and a watch that ended with an error.
func TestWatchCheck(t *testing.T) {
	log := readPathsLog()
	at := func(off int64, key string, v int64) watched {
		return watched{at: contract.Cursor{Partition: 3, Offset: off}, key: key, version: v}
	}
	const reg, l0 = "tenant/chaos/project/p0/reg", "tenant/chaos/project/p0/l/0"
	all := []watched{at(0, reg, 1), at(2, l0, 1), at(3, reg, 2), at(5, l0, 2), at(6, reg, 3)}
	acks := []keyVersion{{reg, 1}, {reg, 2}, {l0, 2}, {reg, 3}, {"tenant/chaos/project/p9/reg", 1}}
	for _, tc := range []struct {
		name       string
		start      int64
		got        []watched
		acks       []keyVersion
		errors     []string
		violations int
		check      func(watchFindings) bool
	}{
		{"OK", -1, all, acks, nil, 0, func(f watchFindings) bool { return f.received == 5 && f.expected == 5 && f.acked == 4 }},
		{"OKAfterACursor", 2, all[2:], acks, nil, 0, func(f watchFindings) bool { return f.expected == 3 && f.acked == 3 }},
		{"OKBeyondTheLogRead", -1, append(all[:5:5], at(7, reg, 4)), acks, nil, 0, func(f watchFindings) bool { return f.beyond == 1 }},
		{"ErrGap", -1, []watched{all[0], all[1], all[3], all[4]}, nil, nil, 1, func(f watchFindings) bool { return f.missing == 1 }},
		{"ErrGapOfAnAcknowledgedWrite", -1, []watched{all[0], all[1], all[3], all[4]}, acks, nil, 2, func(f watchFindings) bool { return f.missing == 1 }},
		{"ErrDuplicate", -1, []watched{all[0], all[1], all[1], all[2], all[3], all[4]}, nil, nil, 1, func(f watchFindings) bool { return f.duplicates == 1 }},
		{"ErrAnotherPrefix", -1, []watched{all[0], at(1, "tenant/chaos/project/p00/reg", 1), all[1], all[2], all[3], all[4]}, nil, nil, 1,
			func(f watchFindings) bool { return f.unexpected == 1 }},
		{"ErrOutOfOrder", -1, []watched{all[0], all[2], all[1], all[3], all[4]}, nil, nil, 1, func(f watchFindings) bool { return f.reordered == 1 }},
		{"ErrWrongVersion", -1, []watched{all[0], at(2, l0, 2), all[2], all[3], all[4]}, nil, nil, 1, func(f watchFindings) bool { return f.unexpected == 1 }},
		{"ErrBeforeTheStart", 2, all, nil, nil, 2, func(f watchFindings) bool { return f.unexpected == 2 }},
		{"ErrEndedWithAnError", -1, all, nil, []string{"cursor_expired"}, 1, func(watchFindings) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watchRecord{prefix: "tenant/chaos/project/p0/", start: contract.Cursor{Partition: 3, Offset: tc.start}, events: tc.got, errors: tc.errors}
			f := checkWatch([]*watchRecord{w}, log, map[int32]int64{3: 7}, tc.acks)
			if len(f.violations) != tc.violations || !tc.check(f) {
				t.Fatalf("%d violations %q, findings %+v; want %d", len(f.violations), f.violations, f, tc.violations)
			}
		})
	}
}

// TestHistoryCheck: the history check accepts a read that holds every
// write acknowledged before it from the version it asked for, and names
// one that misses one, returns another value than the log's or than the
// acknowledged one, a version not in the log, or versions not contiguous
// or out of order.
func TestHistoryCheck(t *testing.T) {
	log := readPathsLog()
	const reg = "tenant/chaos/project/p0/reg"
	write := func(v int64, value string, ret int64) linz.Op {
		return linz.Op{In: linz.Input{Key: reg, Kind: linz.Write, Value: value}, Out: linz.Output{Outcome: linz.OK, Version: v}, Return: ret}
	}
	ops := []linz.Op{write(1, "c0-0", 10), write(2, "c0-1", 20), write(3, "c2-5", 30),
		{In: linz.Input{Key: reg, Kind: linz.Write, Value: "c9-9"}, Out: linz.Output{Outcome: linz.Unknown}, Return: 5}}
	vs := func(from int64, values ...string) []historyEntry {
		var out []historyEntry
		for i, v := range values {
			out = append(out, historyEntry{Version: from + int64(i), Value: mustJSON(v)})
		}
		return out
	}
	read := func(call, from int64, versions []historyEntry) historyRead {
		return historyRead{Key: reg, From: from, Call: call, Return: call + 5, Versions: versions}
	}
	for _, tc := range []struct {
		name       string
		read       historyRead
		violations int
	}{
		{"OK", read(31, 1, vs(1, "c0-0", "c0-1", "c2-5")), 0},
		{"OKFromAVersion", read(31, 2, vs(2, "c0-1", "c2-5")), 0},
		{"OKWriteConcurrent", read(25, 1, vs(1, "c0-0", "c0-1")), 0},
		{"OKNotFoundBeforeAnyAck", historyRead{Key: reg, From: 1, Call: 2, Return: 3, NotFound: true}, 0},
		{"ErrMissesAnAcknowledgedWrite", read(31, 1, vs(1, "c0-0", "c0-1")), 1},
		{"ErrStale", read(31, 2, vs(2, "c0-1")), 1},
		{"ErrNotFoundAfterAnAck", historyRead{Key: reg, From: 1, Call: 15, Return: 16, NotFound: true}, 1},
		{"ErrGap", read(25, 1, []historyEntry{{1, mustJSON("c0-0")}, {3, mustJSON("c2-5")}}), 2},                     // v2 acknowledged, and not contiguous
		{"ErrOutOfOrder", read(25, 1, []historyEntry{{2, mustJSON("c0-1")}, {1, mustJSON("c0-0")}}), 2},              // v2 where v1 was due, v1 after v2
		{"ErrValueNotTheLogs", read(25, 1, []historyEntry{{1, mustJSON("c0-0")}, {2, mustJSON("c9-9")}}), 2},         // neither the log's nor the acknowledged value
		{"ErrNotInTheLog", read(31, 1, append(vs(1, "c0-0", "c0-1", "c2-5"), historyEntry{4, mustJSON("c9-9")})), 1}, // v4 never committed
		{"ErrDoesNotStartAtTheVersionAskedFor", read(31, 2, vs(1, "c0-0", "c0-1", "c2-5")), 1},                       // v1 where v2 was due
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := checkHistory([]historyRead{tc.read}, ops, log)
			if len(f.violations) != tc.violations {
				t.Fatalf("%d violations %q; want %d", len(f.violations), f.violations, tc.violations)
			}
		})
	}
}
