package decide

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/schemas"
)

func ptr(v int64) *int64 { return &v }

func mustKey(t *testing.T, s string) contract.Key {
	t.Helper()
	k, err := contract.ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/k")
	created := now.Add(-time.Hour)
	past := now.Add(-time.Second)
	live := func(v int64, val string) keystate.State {
		return keystate.State{Version: v, Live: true, Entry: contract.Entry{Key: key.String(), Version: v, Value: json.RawMessage(val), CreatedAt: created}}
	}
	expired := live(4, `"old"`)
	expired.Entry.ExpiresAt = &past
	deleted := keystate.State{Version: 7, Entry: contract.Entry{Key: key.String(), Version: 7}}

	for _, tc := range []struct {
		name    string
		cur     keystate.State
		req     fixture
		code    string // error code, or "" when accepted
		version int64  // version of the event
		op      contract.Op
		current int64 // currentVersion of a conflict
	}{
		{"OKCreate", keystate.State{}, fixture{Op: contract.OpPut, Value: json.RawMessage(`1`), ExpectedVersion: ptr(0)}, "", 1, contract.OpCreate, 0},
		{"OKSet", live(3, `1`), fixture{Op: contract.OpPut, Value: json.RawMessage(`2`)}, "", 4, contract.OpSet, 0},
		{"OKCAS", live(3, `1`), fixture{Op: contract.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(3)}, "", 4, contract.OpCAS, 0},
		{"ErrCASStale", live(3, `1`), fixture{Op: contract.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(2)}, contract.EConflict, 0, "", 3},
		{"ErrCreateExisting", live(3, `1`), fixture{Op: contract.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(0)}, contract.EConflict, 0, "", 3},
		{"ErrCASOnAbsent", keystate.State{}, fixture{Op: contract.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(1)}, contract.EConflict, 0, "", 0},
		{"OKCreateOverExpired", expired, fixture{Op: contract.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(0)}, "", 5, contract.OpCreate, 0},
		{"ErrCASOnExpired", expired, fixture{Op: contract.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(4)}, contract.EConflict, 0, "", 0},
		{"OKRecreateAfterDelete", deleted, fixture{Op: contract.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(0)}, "", 8, contract.OpCreate, 0},
		{"OKDelete", live(3, `1`), fixture{Op: contract.OpDelete}, "", 4, contract.OpDelete, 0},
		{"OKDeleteCAS", live(3, `1`), fixture{Op: contract.OpDelete, ExpectedVersion: ptr(3)}, "", 4, contract.OpDelete, 0},
		{"ErrDeleteStale", live(3, `1`), fixture{Op: contract.OpDelete, ExpectedVersion: ptr(1)}, contract.EConflict, 0, "", 3},
		{"ErrDeleteAbsent", deleted, fixture{Op: contract.OpDelete}, contract.ENotFound, 0, "", 0},
		{"ErrDeleteExpired", expired, fixture{Op: contract.OpDelete}, contract.ENotFound, 0, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Principal = key, "p"
			d := decideOn(tc.cur, &r, testEnv(now, 9))
			if tc.code != "" {
				if contract.ErrorCode(d.Err) != tc.code || d.Event != nil {
					t.Fatalf("want %s, got event %v err %v", tc.code, d.Event, d.Err)
				}
				if tc.code == contract.EConflict {
					if d.Conflict == nil || d.Conflict.CurrentVersion != tc.current {
						t.Fatalf("conflict record %+v, want current %d", d.Conflict, tc.current)
					}
					var e *contract.Error
					errors.As(d.Err, &e)
					if e.CorrelationID != d.Conflict.ID {
						t.Fatalf("409 and conflict record have different ids")
					}
				}
				return
			}
			e := d.Event
			if d.Err != nil || e == nil {
				t.Fatalf("want an event, got err %v", d.Err)
			}
			if e.Version != tc.version || e.PrevVersion != tc.cur.Version || e.Op != tc.op || e.WriterEpoch != 9 || e.Principal != "p" {
				t.Fatalf("event %+v", e)
			}
			if tc.cur.Live && string(e.Before) != string(tc.cur.Entry.Value) {
				t.Fatalf("before %s, want %s", e.Before, tc.cur.Entry.Value)
			}
			if r.Op == contract.OpDelete && (e.Kind != contract.KindDelete || string(e.After) != "null") {
				t.Fatalf("delete event %+v", e)
			}
		})
	}
}

func TestDecideCreatedAtAndTTL(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/k")
	created := now.Add(-time.Hour)
	cur := keystate.State{Version: 1, Live: true, Entry: contract.Entry{Key: key.String(), Version: 1, Value: json.RawMessage(`1`), CreatedAt: created}}
	d := decideOn(cur, &fixture{Key: key, Op: contract.OpPut, Value: json.RawMessage(`2`), TTLSeconds: 30}, testEnv(now, 1))
	if !d.Event.CreatedAt.Equal(created) {
		t.Fatalf("an update changed createdAt to %v", d.Event.CreatedAt)
	}
	if d.Event.ExpiresAt == nil || !d.Event.ExpiresAt.Equal(now.Add(30*time.Second)) || d.Event.Semantics.TTLSeconds != 30 {
		t.Fatalf("ttl not applied: %+v", d.Event)
	}
}

func TestDecideRequestID(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/k")
	r := &fixture{Key: key, Op: contract.OpPut, Value: json.RawMessage(`1`), ExpectedVersion: ptr(0), RequestID: "r-1", Principal: "p"}
	first := decideOn(keystate.State{}, r, testEnv(now, 1))
	st := keystate.FromEvent(first.Event)

	again := *r
	if d := decideOn(st, &again, testEnv(now.Add(time.Second), 1)); d.Event != nil || d.Err != nil || !d.Result.Replayed || d.Result.Entry.Version != 1 {
		t.Fatalf("replay: %+v", d)
	}
	other := *r
	other.Value = json.RawMessage(`2`)
	if d := decideOn(st, &other, testEnv(now, 1)); contract.ErrorCode(d.Err) != contract.EConflict || d.Conflict.Reason != "request_id_reused" {
		t.Fatalf("reused requestId: %+v", d)
	}
	otherPrincipal := *r
	otherPrincipal.Principal = "q"
	if d := decideOn(st, &otherPrincipal, testEnv(now, 1)); contract.ErrorCode(d.Err) != contract.EConflict {
		t.Fatalf("another principal's same requestId must not replay: %+v", d)
	}
}

// TestDecideRequestIDBounds: an increment's bounds are part of its
// request: the same requestId with other bounds is a reuse, with the
// same bounds a replay, and an unbounded increment keeps the digest it
// had before bounds existed.
func TestDecideRequestIDBounds(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/k")
	r := &fixture{Key: key, Op: contract.OpIncrement, By: -1, Create: true, Min: ptr(-5), RequestID: "r-1", Principal: "p"}
	first := decideOn(keystate.State{}, r, testEnv(now, 1))
	if first.Event == nil {
		t.Fatalf("first decrement: %v", first.Err)
	}
	st := keystate.FromEvent(first.Event)
	again := *r
	again.Min = ptr(-5) // equal, not the same pointer
	if d := decideOn(st, &again, testEnv(now, 1)); !d.Result.Replayed || d.Event != nil {
		t.Fatalf("the same bounds must replay: %+v", d)
	}
	for name, mod := range map[string]func(*fixture){
		"OtherMin":   func(r *fixture) { r.Min = ptr(0) },
		"NoMin":      func(r *fixture) { r.Min = nil },
		"MaxAdded":   func(r *fixture) { r.Max = ptr(10) },
		"MinIsNoMax": func(r *fixture) { r.Min, r.Max = nil, ptr(-5) },
	} {
		t.Run(name, func(t *testing.T) {
			other := *r
			mod(&other)
			if d := decideOn(st, &other, testEnv(now, 1)); contract.ErrorCode(d.Err) != contract.EConflict || d.Conflict == nil || d.Conflict.Reason != "request_id_reused" {
				t.Fatalf("a requestId retried with other bounds must be a reuse: %+v", d)
			}
		})
	}
	// Digests are stored with events: an unbounded increment's digest
	// must not change with the bounds' arrival.
	plain := fixture{Key: key, Op: contract.OpIncrement, By: 1, RequestID: "r", Principal: "p"}
	if got, want := plain.Digest(), "30b56eebbe4a1b72e6cf86d4ca6eaf42"; got != want {
		t.Fatalf("unbounded increment digest %s, want %s (as before bounds)", got, want)
	}
}

// TestLockTokenGrowsAcrossBreak: a plain write may not store a lock
// value; a lock broken by a plain write of a lock-shaped value with a huge
// token, then deleted, is taken next with a token greater than every
// earlier server token, and the broken value is never read as a lock.
func TestLockTokenGrowsAcrossBreak(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/lock")
	var st keystate.State
	step := func(r fixture) Decision {
		t.Helper()
		r.Key = key
		if r.Principal == "" {
			r.Principal = "p"
		}
		d := decideOn(st, &r, testEnv(now, 1))
		if d.Event != nil {
			st = keystate.FromEvent(d.Event)
		}
		return d
	}
	acquire := fixture{Op: contract.OpLockAcquire, Holder: "a", TTLSeconds: 30}
	first := step(acquire)
	a, err := LockAnswerOf(&first.Result.Entry)
	if err != nil {
		t.Fatal(err)
	}
	forge := fixture{Op: contract.OpPut, Value: json.RawMessage(`{"holder":"a","token":999999}`), ExpectedVersion: ptr(st.Version),
		Semantics: contract.Semantics{Purpose: contract.PurposeLock}}
	if d := step(forge); contract.ErrorCode(d.Err) != contract.EInvalid {
		t.Fatalf("a plain write of a lock value: %+v, want invalid", d)
	}
	brk := step(fixture{Op: contract.OpPut, Value: json.RawMessage(`{"holder":"x","token":999999}`), ExpectedVersion: ptr(st.Version)})
	if brk.Err != nil || brk.Event.Semantics.Purpose == contract.PurposeLock {
		t.Fatalf("break: %+v", brk)
	}
	if d := step(acquire); contract.ErrorCode(d.Err) != contract.EWrongType {
		t.Fatalf("acquire over the broken value: %v, want wrong_type", d.Err)
	}
	if d := step(fixture{Op: contract.OpDelete}); d.Err != nil {
		t.Fatal(d.Err)
	}
	next := step(fixture{Op: contract.OpLockAcquire, Holder: "b", TTLSeconds: 30, Principal: "q"})
	b, err := LockAnswerOf(&next.Result.Entry)
	if err != nil {
		t.Fatal(err)
	}
	if b.Token <= a.Token {
		t.Fatalf("next tenure's token %d is not greater than %d", b.Token, a.Token)
	}
}

// TestDecideKeepsSemantics: a write without semantics keeps the entry's
// purpose, producer, hints and specRef; a put's expiry is its own unless
// KeepTTL; a conflict counts against the key's purpose.
func TestDecideKeepsSemantics(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/k")
	exp := now.Add(time.Hour)
	sem := contract.Semantics{Purpose: "checkpoint", Producer: "job-7", ConsumerHints: []string{"dash"}, TTLSeconds: 3600}
	cur := keystate.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: json.RawMessage(`{"n":1}`),
		ExpiresAt: &exp, SpecRef: "spec/1", Semantics: sem}}
	given := contract.Semantics{Purpose: "config", Producer: "ops"}
	for _, tc := range []struct {
		name    string
		req     fixture
		sem     contract.Semantics
		specRef string
		expires *time.Time
	}{
		{"PutKeepsSemanticsDropsTTL", fixture{Op: contract.OpPut, Value: json.RawMessage(`2`)},
			contract.Semantics{Purpose: "checkpoint", Producer: "job-7", ConsumerHints: []string{"dash"}}, "spec/1", nil},
		{"PutKeepTTL", fixture{Op: contract.OpPut, Value: json.RawMessage(`2`), KeepTTL: true}, sem, "spec/1", &exp},
		{"PutNewSemantics", fixture{Op: contract.OpPut, Value: json.RawMessage(`2`), Semantics: given, SpecRef: "spec/2"}, given, "spec/2", nil},
		{"PatchKeeps", fixture{Op: contract.OpPatch, Set: map[string]json.RawMessage{"n": json.RawMessage(`2`)}}, sem, "spec/1", &exp},
		{"IncrementKeeps", fixture{Op: contract.OpIncrement, By: 1}, sem, "spec/1", &exp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, c := tc.req, cur
			r.Key, r.Principal = key, "p"
			if r.Op == contract.OpIncrement {
				c.Entry.Value = json.RawMessage(`1`)
			}
			checkKept(t, decideOn(c, &r, testEnv(now, 1)), tc.sem, tc.specRef, tc.expires)
		})
	}
}

func checkKept(t *testing.T, d Decision, sem contract.Semantics, specRef string, expires *time.Time) {
	t.Helper()
	if d.Err != nil {
		t.Fatal(d.Err)
	}
	e := d.Event
	got, _ := json.Marshal(e.Semantics)
	want, _ := json.Marshal(sem)
	if string(got) != string(want) || e.SpecRef != specRef {
		t.Fatalf("semantics %s specRef %q, want %s %q", got, e.SpecRef, want, specRef)
	}
	if (e.ExpiresAt == nil) != (expires == nil) || (expires != nil && !e.ExpiresAt.Equal(*expires)) {
		t.Fatalf("expires %v, want %v", e.ExpiresAt, expires)
	}
	if d.Result.Entry.Semantics.Purpose != sem.Purpose {
		t.Fatalf("answer's semantics %+v", d.Result.Entry.Semantics)
	}
}

// A denied write (403 in the API) decides to a forbidden record in
// kv.conflicts and nothing else, whatever the key's state and the
// request's fields: no event, no answer, no value, no version.
func TestDecideDenied(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/k")
	flag := keystate.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: json.RawMessage(`{"secret":1}`),
		Semantics: contract.Semantics{Purpose: "feature_flag", Producer: "x"}}}
	for _, tc := range []struct {
		name    string
		cur     keystate.State
		req     fixture
		purpose string
	}{
		{"PutOverLiveKey", flag, fixture{Op: contract.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(1), RequestID: "r-1"}, "feature_flag"},
		{"DeleteAbsent", keystate.State{}, fixture{Op: contract.OpDelete}, "other"},
		{"Increment", flag, fixture{Op: contract.OpIncrement, By: 1}, "feature_flag"},
		{"LockAcquire", keystate.State{}, fixture{Op: contract.OpLockAcquire, Holder: "h"}, "other"},
		{"ReusedRequestID", keystate.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: json.RawMessage(`1`), RequestID: "r-1"}},
			fixture{Op: contract.OpPatch, RequestID: "r-1"}, "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Principal, r.Denied = key, "p", true
			d := decideOn(tc.cur, &r, testEnv(now, 9))
			c := d.Conflict
			if d.Event != nil || d.Err != nil || c == nil {
				t.Fatalf("want only a conflict record, got event %v err %v conflict %v", d.Event, d.Err, c)
			}
			if c.Reason != ReasonForbidden || c.Op != r.Op || c.Key != key.String() || c.Scope != key.Scope() ||
				c.Principal != "p" || c.RequestID != r.RequestID || !c.TS.Equal(now) || c.ID == "" || c.SchemaVersion != contract.SchemaVersion {
				t.Fatalf("record %+v", c)
			}
			if string(c.Attempted) != "null" || string(c.Current) != "null" || c.ExpectedVersion != -1 || c.CurrentVersion != 0 {
				t.Fatalf("record carries a value or version: %+v", c)
			}
			if c.Semantics.Purpose != tc.purpose || c.Semantics.Producer != "" || c.SpecRef != "" {
				t.Fatalf("semantics %+v, want only purpose %s", c.Semantics, tc.purpose)
			}
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if err := schemas.ValidateConflict(b); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
		})
	}
}

// TestCheckBlind: what a principal that may write a key but not read it
// may not ask for (403 forbidden naming the parameter, ops[i].<parameter>
// in a transaction): a condition on the value, or an addend that could
// probe the 64-bit bound. Versions and existence stay; a principal that
// may read asks anything.
func TestCheckBlind(t *testing.T) {
	k := mustKey(t, "tenant/a/project/b/k")
	one, big := int64(1), int64(MaxBlindStep)
	eq := &contract.FieldCondition{Field: "f", Equals: json.RawMessage(`1`)}
	fieldCond := &contract.Condition{Field: "f", Equals: json.RawMessage(`1`)}
	versionCond := &contract.Condition{Version: &one}
	step := func(op contract.Op, blind bool, cond *contract.Condition, mod func(*fixture)) fixtureStep {
		r := &fixture{Key: k, Op: op, Principal: "wo", Blind: blind}
		if mod != nil {
			mod(r)
		}
		return fixtureStep{Req: r, Cond: cond}
	}
	for _, tc := range []struct {
		name  string
		req   fixture
		field string // "" when allowed
	}{
		{"ErrIncrementMax", fixture{Op: contract.OpIncrement, By: 1, Max: &one, Blind: true}, "max"},
		{"ErrIncrementMin", fixture{Op: contract.OpIncrement, By: -1, Min: &one, Blind: true}, "min"},
		{"ErrIncrementBeyondBlindStep", fixture{Op: contract.OpIncrement, By: big + 1, Blind: true}, "by"},
		{"ErrDecrementBeyondBlindStep", fixture{Op: contract.OpIncrement, By: -big - 1, Blind: true}, "by"},
		{"ErrPatchIf", fixture{Op: contract.OpPatch, If: eq, Blind: true}, "if"},
		{"OKIncrementAtBlindStep", fixture{Op: contract.OpIncrement, By: -big, Blind: true}, ""},
		{"OKIncrementWithExpectedVersion", fixture{Op: contract.OpIncrement, By: 1, ExpectedVersion: &one, Blind: true}, ""},
		{"OKPatch", fixture{Op: contract.OpPatch, Set: map[string]json.RawMessage{"f": json.RawMessage(`1`)}, Blind: true}, ""},
		{"OKPutWithExpectedVersion", fixture{Op: contract.OpPut, ExpectedVersion: &one, Blind: true}, ""},
		{"OKSAdd", fixture{Op: contract.OpSAdd, Member: "m", Blind: true}, ""},
		{"OKReaderBounds", fixture{Op: contract.OpIncrement, By: big * 4, Min: &one, Max: &one}, ""},
		{"OKReaderIf", fixture{Op: contract.OpPatch, If: eq}, ""},
		{"ErrTxnFieldCondition", fixture{Op: contract.OpTxn, Txn: []fixtureStep{step(contract.OpPut, false, fieldCond, nil), step(contract.OpPatch, true, fieldCond, func(r *fixture) { r.If = eq })}}, "ops[1].condition.field"},
		{"ErrTxnCheck", fixture{Op: contract.OpTxn, Txn: []fixtureStep{step(contract.OpCheck, true, versionCond, nil)}}, "ops[0].key"},
		{"ErrTxnIncrementMax", fixture{Op: contract.OpTxn, Txn: []fixtureStep{step(contract.OpIncrement, true, versionCond, func(r *fixture) { r.Max = &one })}}, "ops[0].max"},
		{"ErrTxnIncrementBeyondBlindStep", fixture{Op: contract.OpTxn, Txn: []fixtureStep{step(contract.OpIncrement, true, nil, func(r *fixture) { r.By = big + 1 })}}, "ops[0].by"},
		{"OKTxnVersionCondition", fixture{Op: contract.OpTxn, Txn: []fixtureStep{step(contract.OpPatch, true, versionCond, nil), step(contract.OpCheck, false, fieldCond, nil)}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Principal = k, "wo"
			err := CheckBlind(commandOf(&r))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *contract.Error
			if !errors.As(err, &e) || e.Code != contract.EForbidden || e.Field != tc.field || e.Current != nil {
				t.Fatalf("%v, want forbidden on field %s", err, tc.field)
			}
		})
	}
}
