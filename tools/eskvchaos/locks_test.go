package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
)

// TestLocksCheck: the lock workload's check of the log finds a resource
// write with a token of an earlier tenure, one while the lock is free,
// one after the lease ended, a tenure begun while the one before was
// live (two live holders), and a tenure whose token goes back.
func TestLocksCheck(t *testing.T) {
	lock := lockKeys()[0]
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	offset := int64(0)
	at := func(e contract.Event) logcheck.Event { offset++; return logcheck.Event{Offset: offset, Event: e} }
	acquire := func(v, token int64, holder string, ts time.Time) logcheck.Event {
		exp := ts.Add(lockTTL * time.Second)
		return at(contract.Event{Key: lock, Version: v, Kind: contract.KindPut, TS: ts, ExpiresAt: &exp,
			After: json.RawMessage(fmt.Sprintf(`{"holder":%q,"token":%d}`, holder, token))})
	}
	release := func(v int64, ts time.Time) logcheck.Event {
		return at(contract.Event{Key: lock, Version: v, Kind: contract.KindDelete, TS: ts})
	}
	write := func(v, token int64, ts time.Time) logcheck.Event {
		return at(contract.Event{Key: resourceKey(lock), Version: v, Kind: contract.KindPut, TS: ts,
			After: json.RawMessage(fmt.Sprintf(`{"holder":"c0","token":%d,"seq":1}`, token))})
	}
	s := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	for _, tc := range []struct {
		name            string
		evs             func() []logcheck.Event
		tenures, writes int
		violations      int
	}{
		{"OK", func() []logcheck.Event {
			return []logcheck.Event{acquire(1, 1, "c0", s(0)), write(1, 1, s(1)), acquire(2, 1, "c0", s(1)), // re-entry keeps the token
				release(3, s(2)), acquire(4, 4, "c1", s(3)), write(2, 4, s(4))}
		}, 2, 2, 0},
		{"ErrEarlierTenuresToken", func() []logcheck.Event {
			return []logcheck.Event{acquire(1, 1, "c0", s(0)), acquire(2, 2, "c1", s(3)), write(1, 1, s(4))}
		}, 2, 1, 1},
		{"ErrWhileFree", func() []logcheck.Event {
			return []logcheck.Event{acquire(1, 1, "c0", s(0)), release(2, s(1)), write(1, 1, s(1))}
		}, 1, 1, 1},
		{"ErrAfterTheLease", func() []logcheck.Event {
			return []logcheck.Event{acquire(1, 1, "c0", s(0)), write(1, 1, s(3))}
		}, 1, 1, 1},
		{"ErrTwoLiveHolders", func() []logcheck.Event {
			return []logcheck.Event{acquire(1, 1, "c0", s(0)), acquire(2, 2, "c1", s(1))} // c0's lease lasts to s(2)
		}, 2, 0, 1},
		{"ErrTokenGoesBack", func() []logcheck.Event {
			return []logcheck.Event{acquire(5, 5, "c0", s(0)), release(6, s(1)), acquire(7, 3, "c1", s(2))}
		}, 2, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			offset = 0
			f := newLockWorkload(nil).check(tc.evs())
			if f.tenures != tc.tenures || f.writes != tc.writes || len(f.violations) != tc.violations {
				t.Fatalf("tenures %d writes %d violations %v; want %d, %d and %d", f.tenures, f.writes, f.violations, tc.tenures, tc.writes, tc.violations)
			}
		})
	}
}
