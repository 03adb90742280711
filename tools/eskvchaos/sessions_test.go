package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
)

// TestSessionsCheck: the session workload's check of the log finds a
// key of an ended session live after its end, a lock granted to a
// session while another live session holds it, an attachment ended
// twice, and an attached entry with an expiry of its own.
func TestSessionsCheck(t *testing.T) {
	s1, s2 := sessionsPrj+"session-c0-0", sessionsPrj+"session-c1-0"
	k, lock := sessionsPrj+"svc-c0-0-0", sessionLockKeys()[0]
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	exp := t0.Add(2 * time.Second)
	offset := int64(0)
	at := func(e contract.Event) logcheck.Event { offset++; return logcheck.Event{Offset: offset, Event: e} }
	sess := func(key string, v int64) logcheck.Event {
		return at(contract.Event{Key: key, Version: v, Kind: contract.KindPut, Op: contract.OpSessionCreate, TS: t0, ExpiresAt: &exp,
			Semantics: contract.Semantics{Purpose: contract.PurposeSession}})
	}
	attach := func(key, session, purpose string, v int64) logcheck.Event {
		return at(contract.Event{Key: key, Version: v, Kind: contract.KindPut, TS: t0, After: json.RawMessage(`1`),
			Semantics: contract.Semantics{Purpose: purpose}, Session: &contract.SessionLink{Key: session}})
	}
	end := func(key, session string, v int64) logcheck.Event {
		return at(contract.Event{Key: key, Version: v, Kind: contract.KindDelete, TS: t0, TxnID: "t",
			Semantics: contract.Semantics{Purpose: "other"}, Session: &contract.SessionLink{Key: session, Reason: contract.SessionRevoked}})
	}
	sessEnd := func(key string, v int64) logcheck.Event {
		return at(contract.Event{Key: key, Version: v, Kind: contract.KindDelete, Op: contract.OpSessionRevoke, TS: t0, TxnID: "t",
			Semantics: contract.Semantics{Purpose: contract.PurposeSession}, Session: &contract.SessionLink{Key: key, Reason: contract.SessionRevoked}})
	}
	for _, tc := range []struct {
		name       string
		evs        func() []logcheck.Event
		violations int
	}{
		{"OK", func() []logcheck.Event {
			return []logcheck.Event{sess(s1, 1), attach(k, s1, "other", 1), attach(lock, s1, contract.PurposeLock, 1),
				end(k, s1, 2), end(lock, s1, 2), sessEnd(s1, 2), sess(s2, 1), attach(lock, s2, contract.PurposeLock, 3)}
		}, 0},
		{"ErrKeyOutlivesSession", func() []logcheck.Event {
			return []logcheck.Event{sess(s1, 1), attach(k, s1, "other", 1), sessEnd(s1, 2)}
		}, 1},
		{"ErrLockOfTwoSessions", func() []logcheck.Event {
			return []logcheck.Event{sess(s1, 1), sess(s2, 1), attach(lock, s1, contract.PurposeLock, 1), attach(lock, s2, contract.PurposeLock, 2)}
		}, 1},
		{"ErrEndedTwice", func() []logcheck.Event {
			return []logcheck.Event{sess(s1, 1), attach(k, s1, "other", 1), end(k, s1, 2), end(k, s1, 3), sessEnd(s1, 2)}
		}, 2}, // twice, and the second time no longer attached
		{"ErrAttachedWithExpiry", func() []logcheck.Event {
			e := attach(k, s1, "other", 1)
			e.Event.ExpiresAt = &exp
			return []logcheck.Event{sess(s1, 1), e}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			offset = 0
			f := newSessionWorkload(nil).check(tc.evs())
			if len(f.violations) != tc.violations {
				t.Fatalf("violations %v; want %d", f.violations, tc.violations)
			}
		})
	}
}
