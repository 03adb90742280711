package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/projection/elemkey"
)

// TestListsCheck: the list workload's check of the log finds an
// acknowledged write missing from it, a pop whose value is not the
// fold's end, and metadata that does not count the fold.
func TestListsCheck(t *testing.T) {
	key := listWorkloadKeys()[0]
	ev := func(v int64, op contract.Op, value string, size int) logcheck.Event {
		e := logcheck.Event{Offset: v, Event: contract.Event{Key: key, Version: v, Kind: contract.KindPut, Op: op,
			After: json.RawMessage(fmt.Sprintf(`{"type":"list","size":%d,"since":1}`, size))}}
		if value != "" {
			el := contract.ElementAdd
			if op == contract.OpLPop || op == contract.OpRPop {
				el = contract.ElementRemove
			}
			e.Event.Element = &contract.Element{Op: el, Member: elemkey.ListPosition(v), Value: json.RawMessage(value)}
		}
		return e
	}
	log := []logcheck.Event{ev(1, contract.OpRPush, `"a"`, 1), ev(2, contract.OpLPush, `"b"`, 2), ev(3, contract.OpRPush, `"c"`, 3),
		ev(4, contract.OpLTrim, "", 2), ev(5, contract.OpRPop, `"a"`, 1)}
	for _, tc := range []struct {
		name           string
		evs            []logcheck.Event
		acked          []listChange
		missing, folds int
	}{
		{"OK", log, []listChange{{key, 1, contract.OpRPush, `"a"`}, {key, 5, contract.OpRPop, `"a"`}}, 0, 0},
		{"ErrAcknowledgedNotInLog", log, []listChange{{key, 6, contract.OpLPush, `"d"`}}, 1, 0},
		{"ErrAnotherValueAtThatVersion", log, []listChange{{key, 5, contract.OpRPop, `"b"`}}, 1, 0},
		{"ErrPopNotTheEnd", append(log[:4:4], ev(5, contract.OpRPop, `"b"`, 1)), nil, 0, 1},
		{"ErrSizeOff", append(log[:4:4], ev(5, contract.OpRPop, `"a"`, 2)), nil, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newListWorkload(nil)
			s.acked = tc.acked
			f, err := s.check(t.Context(), tc.evs, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.missing) != tc.missing || len(f.folds) != tc.folds || f.events != len(tc.evs) {
				t.Fatalf("missing %v, folds %v; want %d and %d", f.missing, f.folds, tc.missing, tc.folds)
			}
		})
	}
}
