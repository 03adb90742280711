package decide

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/schemas"
)

// TestDecideTouch: a touch gives a visible entry a new expiry (or none)
// at the next version and keeps its value byte for byte, its semantics
// but ttlSeconds, specRef and creation time; it refuses what put refuses
// of a lock, leadership or collection, and never revives a missing or
// expired key.
func TestDecideTouch(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/k")
	created, soon, past := now.Add(-time.Hour), now.Add(10*time.Second), now.Add(-time.Second)
	entry := func(v int64, val, purpose string, exp *time.Time) keystate.State {
		return keystate.State{Version: v, Live: true, Entry: contract.Entry{Key: key.String(), Version: v, Value: json.RawMessage(val), CreatedAt: created,
			ExpiresAt: exp, SpecRef: "spec/k", Semantics: contract.Semantics{Purpose: purpose, Producer: "svc", TTLSeconds: 10}}}
	}
	value := " {\"b\": 2,\t\"a\":1} " // not compact: a touch keeps the stored bytes
	lock := entry(5, `{"holder":"h","token":5,"acquiredAt":"2026-11-22T11:00:00Z","principal":"p"}`, contract.PurposeLock, &soon)
	leader := entry(5, `{"holder":"h","token":5,"acquiredAt":"2026-11-22T11:00:00Z","principal":"p"}`, contract.PurposeLeader, &soon)
	set := entry(2, `{"size":1}`, contract.PurposeSet, nil)
	expired := entry(4, value, "config", &past)
	deleted := keystate.State{Version: 7, Entry: contract.Entry{Key: key.String(), Version: 7}}
	for _, tc := range []struct {
		name     string
		cur      keystate.State
		ttl      int64
		expected *int64
		code     string // error code, or "" when accepted
	}{
		{"OKFresh", entry(3, value, "config", &soon), 60, nil, ""},
		{"OKNoExpiryBefore", entry(3, value, "config", nil), 60, nil, ""},
		{"OKPersist", entry(3, value, "config", &soon), 0, nil, ""},
		{"OKExpectedVersion", entry(3, value, "config", &soon), 60, ptr(3), ""},
		{"OKCounter", entry(3, `41`, "counter", &soon), 60, nil, ""},
		{"ErrVersionMismatch", entry(3, value, "config", &soon), 60, ptr(2), contract.EConflict},
		{"ErrAbsent", keystate.State{}, 60, nil, contract.ENotFound},
		{"ErrAbsentExpectedVersion", keystate.State{}, 60, ptr(1), contract.EConflict},
		{"ErrDeleted", deleted, 60, nil, contract.ENotFound},
		{"ErrExpired", expired, 60, nil, contract.ENotFound},
		{"ErrExpiredExpectedVersion", expired, 60, ptr(4), contract.EConflict},
		{"ErrLockHeld", lock, 60, nil, contract.ELockHeld},
		{"ErrLockNamingVersion", lock, 60, ptr(5), contract.EWrongType},
		{"ErrLeader", leader, 60, nil, contract.ENotLeader},
		{"ErrSet", set, 60, nil, contract.EWrongType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &KV{Header: Header{Key: key, Op: contract.OpTouch, Principal: "q"}, TTLSeconds: tc.ttl, ExpectedVersion: tc.expected}
			d := c.Decide(Input{State: tc.cur}, testEnv(now, 9))
			if tc.code != "" {
				if contract.ErrorCode(d.Err) != tc.code || d.Event != nil {
					t.Fatalf("want %s, got event %v err %v", tc.code, d.Event, d.Err)
				}
				if tc.code == contract.EConflict && (d.Conflict == nil || d.Conflict.Op != contract.OpTouch || string(d.Conflict.Attempted) != "null") {
					t.Fatalf("conflict record %+v, want op touch attempting null", d.Conflict)
				}
				return
			}
			checkTouchEvent(t, d, tc.cur.Entry, tc.ttl, now)
		})
	}
}

// checkTouchEvent checks d, an accepted touch of before with ttl at now.
func checkTouchEvent(t *testing.T, d Decision, before contract.Entry, ttl int64, now time.Time) {
	t.Helper()
	e := d.Event
	if d.Err != nil || e == nil {
		t.Fatalf("want an event, got err %v", d.Err)
	}
	if e.Op != contract.OpTouch || e.Kind != contract.KindPut || e.Version != before.Version+1 || e.PrevVersion != before.Version || e.Principal != "q" {
		t.Fatalf("event %+v", e)
	}
	if string(e.Before) != string(before.Value) || string(e.After) != string(before.Value) || string(d.Result.Entry.Value) != string(before.Value) {
		t.Fatalf("value changed: before %q after %q answer %q, want %q", e.Before, e.After, d.Result.Entry.Value, before.Value)
	}
	want := before.Semantics
	want.TTLSeconds = ttl
	if !e.CreatedAt.Equal(before.CreatedAt) || e.SpecRef != before.SpecRef || e.Semantics.Purpose != want.Purpose ||
		e.Semantics.Producer != want.Producer || e.Semantics.TTLSeconds != ttl {
		t.Fatalf("metadata not kept: %+v", e)
	}
	switch {
	case ttl == 0 && e.ExpiresAt != nil:
		t.Fatalf("persist left expiresAt %v", e.ExpiresAt)
	case ttl > 0 && (e.ExpiresAt == nil || !e.ExpiresAt.Equal(now.Add(time.Duration(ttl)*time.Second))):
		t.Fatalf("expiresAt %v, want now+%ds", e.ExpiresAt, ttl)
	}
	if d.Result.Entry.Version != e.Version || d.Result.Entry.ExpiresAt != e.ExpiresAt {
		t.Fatalf("answer %+v does not match the event", d.Result.Entry)
	}
	b, err := contract.EncodeJSON(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.ValidateChange(b); err != nil {
		t.Fatalf("touch event off the schema: %v\n%s", err, b)
	}
}

// TestDecideTouchReplay: a touch repeated with its requestId is answered
// as a replay and appends nothing; the same requestId with another TTL
// (or persist) is a reuse.
func TestDecideTouchReplay(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/k")
	cur := keystate.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: json.RawMessage(`1`), CreatedAt: now,
		Semantics: contract.Semantics{Purpose: "other"}}}
	touch := func(ttl int64) *KV {
		return &KV{Header: Header{Key: key, Op: contract.OpTouch, RequestID: "r-1", Principal: "p"}, TTLSeconds: ttl}
	}
	first := touch(30).Decide(Input{State: cur}, testEnv(now, 1))
	if first.Event == nil {
		t.Fatalf("first touch: %v", first.Err)
	}
	st := keystate.FromEvent(first.Event)
	later := testEnv(now.Add(time.Second), 1)
	if d := touch(30).Decide(Input{State: st}, later); d.Event != nil || d.Err != nil || !d.Result.Replayed || d.Result.Entry.Version != 4 {
		t.Fatalf("replay: %+v", d)
	}
	for name, ttl := range map[string]int64{"OtherTTL": 60, "Persist": 0} {
		t.Run(name, func(t *testing.T) {
			if d := touch(ttl).Decide(Input{State: st}, later); contract.ErrorCode(d.Err) != contract.EConflict || d.Conflict == nil || d.Conflict.Reason != "request_id_reused" {
				t.Fatalf("a requestId retried with another expiry must be a reuse: %+v", d)
			}
		})
	}
}
