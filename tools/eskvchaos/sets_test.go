package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
)

// TestSetsCheck: the set workload's check of the log finds an
// acknowledged change missing from it and metadata that does not count
// the fold.
func TestSetsCheck(t *testing.T) {
	key := setKeys()[0]
	ev := func(v int64, op, member string, size int) logcheck.Event {
		return logcheck.Event{Offset: v, Event: contract.Event{Key: key, Version: v, Kind: contract.KindPut,
			After:   json.RawMessage(fmt.Sprintf(`{"type":"set","size":%d,"since":1}`, size)),
			Element: &contract.Element{Op: op, Member: member}}}
	}
	log := []logcheck.Event{ev(1, "add", "a", 1), ev(2, "add", "b", 2), ev(3, "remove", "a", 1)}
	for _, tc := range []struct {
		name           string
		evs            []logcheck.Event
		acked          []setChange
		missing, sizes int
	}{
		{"OK", log, []setChange{{key, 1, "add", "a"}, {key, 3, "remove", "a"}}, 0, 0},
		{"ErrAcknowledgedNotInLog", log, []setChange{{key, 4, "add", "c"}}, 1, 0},
		{"ErrAnotherChangeAtThatVersion", log, []setChange{{key, 2, "remove", "b"}}, 1, 0},
		{"ErrSizeOff", append(log[:2:2], ev(3, "remove", "a", 2)), nil, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetWorkload(nil)
			s.acked = tc.acked
			f, err := s.check(t.Context(), tc.evs, nil, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.missing) != tc.missing || len(f.sizes) != tc.sizes || f.events != len(tc.evs) {
				t.Fatalf("missing %v, sizes %v; want %d and %d", f.missing, f.sizes, tc.missing, tc.sizes)
			}
		})
	}
}
