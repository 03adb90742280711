package decide

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// opsCase is one Decision of an op on a state: the error code wanted
// ("" when accepted) and, when accepted, the event's op and value.
type opsCase struct {
	name  string
	cur   keystate.State
	req   fixture
	code  string
	op    contract.Op
	after string // compact JSON of the event's after ("" to skip)
	kind  contract.Kind
}

func runOps(t *testing.T, now time.Time, cases []opsCase) map[string]Decision {
	t.Helper()
	key := mustKey(t, "tenant/a/project/b/k")
	out := map[string]Decision{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Principal = key, "p"
			d := decideOn(tc.cur, &r, testEnv(now, 3))
			out[tc.name] = d
			if tc.code != "" {
				if contract.ErrorCode(d.Err) != tc.code || d.Event != nil {
					t.Fatalf("want %s, got event %+v err %v", tc.code, d.Event, d.Err)
				}
				return
			}
			if d.Err != nil || d.Event == nil {
				t.Fatalf("want an event, got err %v", d.Err)
			}
			e := d.Event
			if e.Op != tc.op || e.Version != tc.cur.Version+1 || e.PrevVersion != tc.cur.Version {
				t.Fatalf("event op %s version %d prev %d, want op %s version %d", e.Op, e.Version, e.PrevVersion, tc.op, tc.cur.Version+1)
			}
			if tc.kind != "" && e.Kind != tc.kind {
				t.Fatalf("kind %s, want %s", e.Kind, tc.kind)
			}
			if tc.after != "" && string(e.After) != tc.after {
				t.Fatalf("after %s, want %s", e.After, tc.after)
			}
		})
	}
	return out
}

func state(key string, v int64, val string, purpose string, exp *time.Time) keystate.State {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return keystate.State{Version: v, Live: true, Entry: contract.Entry{Key: key, Version: v, Value: json.RawMessage(val),
		CreatedAt: created, ExpiresAt: exp, Semantics: contract.Semantics{Purpose: purpose}}}
}

func TestDecideIncrement(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	k := "tenant/a/project/b/k"
	exp := now.Add(time.Minute)
	past := now.Add(-time.Second)
	gone := keystate.State{Version: 5, Entry: contract.Entry{Key: k, Version: 5}}
	ds := runOps(t, now, []opsCase{
		{"OK", state(k, 2, `41`, "counter", nil), fixture{Op: contract.OpIncrement, By: 1}, "", contract.OpIncrement, `42`, contract.KindPut},
		{"OKNegative", state(k, 2, `-3`, "other", nil), fixture{Op: contract.OpIncrement, By: -10}, "", contract.OpIncrement, `-13`, ""},
		{"OKCreate", keystate.State{}, fixture{Op: contract.OpIncrement, By: 5, Create: true}, "", contract.OpIncrement, `5`, ""},
		{"OKCreateAfterDelete", gone, fixture{Op: contract.OpIncrement, By: 1, Create: true}, "", contract.OpIncrement, `1`, ""},
		{"OKCreateOverExpired", state(k, 2, `9`, "counter", &past), fixture{Op: contract.OpIncrement, By: 1, Create: true}, "", contract.OpIncrement, `1`, ""},
		{"OKKeepsExpiry", state(k, 2, `1`, "counter", &exp), fixture{Op: contract.OpIncrement, By: 1}, "", contract.OpIncrement, `2`, ""},
		{"OKNewTTL", state(k, 2, `1`, "counter", &exp), fixture{Op: contract.OpIncrement, By: 1, TTLSeconds: 600}, "", contract.OpIncrement, `2`, ""},
		{"OKCAS", state(k, 2, `1`, "counter", nil), fixture{Op: contract.OpIncrement, By: 1, ExpectedVersion: ptr(2)}, "", contract.OpIncrement, `2`, ""},
		{"ErrCASStale", state(k, 2, `1`, "counter", nil), fixture{Op: contract.OpIncrement, By: 1, ExpectedVersion: ptr(1)}, contract.EConflict, "", "", ""},
		{"ErrMissing", keystate.State{}, fixture{Op: contract.OpIncrement, By: 1}, contract.ENotFound, "", "", ""},
		{"ErrExpiredNoCreate", state(k, 2, `9`, "counter", &past), fixture{Op: contract.OpIncrement, By: 1}, contract.ENotFound, "", "", ""},
		{"ErrString", state(k, 2, `"7"`, "other", nil), fixture{Op: contract.OpIncrement, By: 1}, contract.EWrongType, "", "", ""},
		{"ErrFraction", state(k, 2, `1.5`, "other", nil), fixture{Op: contract.OpIncrement, By: 1}, contract.EWrongType, "", "", ""},
		{"ErrObject", state(k, 2, `{"n":1}`, "other", nil), fixture{Op: contract.OpIncrement, By: 1}, contract.EWrongType, "", "", ""},
		{"ErrOverflow", state(k, 2, `9223372036854775807`, "counter", nil), fixture{Op: contract.OpIncrement, By: 1}, contract.EOutOfRange, "", "", ""},
		{"ErrUnderflow", state(k, 2, `-9223372036854775808`, "counter", nil), fixture{Op: contract.OpIncrement, By: -1}, contract.EOutOfRange, "", "", ""},
		{"ErrLockBreak", state(k, 2, `{"holder":"a","token":2}`, "lock", &exp), fixture{Op: contract.OpIncrement, By: 1}, contract.ELockHeld, "", "", ""},
		// Bounds: the result must lie in [min, max], both inclusive.
		{"OKMinReached", state(k, 2, `1`, "counter", nil), fixture{Op: contract.OpIncrement, By: -1, Min: ptr(0)}, "", contract.OpIncrement, `0`, ""},
		{"OKMaxReached", state(k, 2, `9`, "counter", nil), fixture{Op: contract.OpIncrement, By: 1, Max: ptr(10)}, "", contract.OpIncrement, `10`, ""},
		{"OKMinMaxEqual", state(k, 2, `4`, "counter", nil), fixture{Op: contract.OpIncrement, By: 1, Min: ptr(5), Max: ptr(5)}, "", contract.OpIncrement, `5`, ""},
		{"OKMaxIgnoredOnDecrement", state(k, 2, `50`, "counter", nil), fixture{Op: contract.OpIncrement, By: -1, Min: ptr(0), Max: ptr(100)}, "", contract.OpIncrement, `49`, ""},
		{"OKCreateWithinBounds", keystate.State{}, fixture{Op: contract.OpIncrement, By: 1, Create: true, Min: ptr(0), Max: ptr(1)}, "", contract.OpIncrement, `1`, ""},
		{"ErrBelowMin", state(k, 2, `0`, "counter", nil), fixture{Op: contract.OpIncrement, By: -1, Min: ptr(0)}, contract.EOutOfRange, "", "", ""},
		{"ErrBelowMinByStep", state(k, 2, `2`, "counter", nil), fixture{Op: contract.OpIncrement, By: -3, Min: ptr(0)}, contract.EOutOfRange, "", "", ""},
		{"ErrAboveMax", state(k, 2, `10`, "counter", nil), fixture{Op: contract.OpIncrement, By: 1, Max: ptr(10)}, contract.EOutOfRange, "", "", ""},
		{"ErrCreateBelowMin", keystate.State{}, fixture{Op: contract.OpIncrement, By: -1, Create: true, Min: ptr(0)}, contract.EOutOfRange, "", "", ""},
		{"ErrStillOutsideBounds", state(k, 2, `-5`, "counter", nil), fixture{Op: contract.OpIncrement, By: 1, Min: ptr(0)}, contract.EOutOfRange, "", "", ""},
		{"ErrOverflowBeforeBound", state(k, 2, `9223372036854775807`, "counter", nil), fixture{Op: contract.OpIncrement, By: 1, Max: ptr(0)}, contract.EOutOfRange, "", "", ""},
		{"ErrWrongTypeBeforeBound", state(k, 2, `"x"`, "other", nil), fixture{Op: contract.OpIncrement, By: -1, Min: ptr(0)}, contract.EWrongType, "", "", ""},
	})
	for name, field := range map[string]string{"ErrBelowMin": "min", "ErrBelowMinByStep": "min", "ErrAboveMax": "max",
		"ErrCreateBelowMin": "min", "ErrStillOutsideBounds": "min", "ErrOverflowBeforeBound": "by"} {
		var e *contract.Error
		d := ds[name]
		if !errors.As(d.Err, &e) || e.Field != field || d.Conflict != nil {
			t.Errorf("%s: err %v (field %q), conflict %+v; want field %s and no kv.conflicts record", name, d.Err, e.Field, d.Conflict, field)
			continue
		}
		// The answer carries the entry it was decided against, like every
		// refusal of a write the key's state decided.
		if name == "ErrCreateBelowMin" {
			if e.Current != nil {
				t.Errorf("%s: current %+v on an absent key", name, e.Current)
			}
		} else if e.Current == nil || e.Current.Version != 2 {
			t.Errorf("%s: current %+v, want version 2", name, e.Current)
		}
	}
	if got, want := ds["ErrBelowMinByStep"].Err.Error(), "out_of_range: the counter is 2: subtracting 3 would take it below min 0 (field min)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if got, want := ds["ErrAboveMax"].Err.Error(), "out_of_range: the counter is 10: adding 1 would take it above max 10 (field max)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if e := ds["OKCreate"].Event; e.Semantics.Purpose != "counter" || e.ExpiresAt != nil {
		t.Errorf("new counter: semantics %+v expires %v", e.Semantics, e.ExpiresAt)
	}
	if e := ds["OKKeepsExpiry"].Event; e.ExpiresAt == nil || !e.ExpiresAt.Equal(exp) {
		t.Errorf("increment without ttl changed the expiry to %v", e.ExpiresAt)
	}
	if e := ds["OKNewTTL"].Event; e.ExpiresAt == nil || !e.ExpiresAt.Equal(now.Add(600*time.Second)) {
		t.Errorf("increment with ttl: expiry %v", e.ExpiresAt)
	}
	if e := ds["OKNegative"].Event; e.Semantics.Purpose != "other" {
		t.Errorf("increment changed the purpose to %s", e.Semantics.Purpose)
	}
}

func TestDecidePatch(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	k := "tenant/a/project/b/job"
	job := state(k, 4, `{"state":"pending","n":1,"tags":["x"]}`, "other", nil)
	set := func(kv ...string) map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = json.RawMessage(kv[i+1])
		}
		return m
	}
	cond := func(f, v string) *contract.FieldCondition {
		return &contract.FieldCondition{Field: f, Equals: json.RawMessage(v)}
	}
	ds := runOps(t, now, []opsCase{
		{"OKSet", job, fixture{Op: contract.OpPatch, Set: set("state", `"running"`, "worker", `"w1"`)}, "", contract.OpPatch, `{"n":1,"state":"running","tags":["x"],"worker":"w1"}`, ""},
		{"OKUnset", job, fixture{Op: contract.OpPatch, Unset: []string{"tags", "absent"}}, "", contract.OpPatch, `{"n":1,"state":"pending"}`, ""},
		{"OKSetNull", job, fixture{Op: contract.OpPatch, Set: set("n", `null`)}, "", contract.OpPatch, `{"n":null,"state":"pending","tags":["x"]}`, ""},
		{"OKFieldCAS", job, fixture{Op: contract.OpPatch, If: cond("state", `"pending"`), Set: set("state", `"claimed"`)}, "", contract.OpFieldCAS, `{"n":1,"state":"claimed","tags":["x"]}`, ""},
		{"OKFieldCASCanonical", job, fixture{Op: contract.OpPatch, If: cond("tags", `[ "x" ]`), Set: set("n", `2`)}, "", contract.OpFieldCAS, "", ""},
		{"OKFieldCASNumber", job, fixture{Op: contract.OpPatch, If: cond("n", `1.0`), Set: set("n", `2`)}, "", contract.OpFieldCAS, "", ""},
		{"OKFieldCASMissingIsNull", job, fixture{Op: contract.OpPatch, If: cond("worker", `null`), Set: set("worker", `"w2"`)}, "", contract.OpFieldCAS, "", ""},
		{"OKCreate", keystate.State{}, fixture{Op: contract.OpPatch, Create: true, Set: set("state", `"pending"`)}, "", contract.OpPatch, `{"state":"pending"}`, ""},
		{"OKCreateWithCondition", keystate.State{}, fixture{Op: contract.OpPatch, Create: true, If: cond("state", `null`), Set: set("state", `"pending"`)}, "", contract.OpFieldCAS, "", ""},
		{"ErrFieldCASLost", job, fixture{Op: contract.OpPatch, If: cond("state", `"claimed"`), Set: set("state", `"running"`)}, contract.EFieldMismatch, "", "", ""},
		{"ErrMissing", keystate.State{}, fixture{Op: contract.OpPatch, Set: set("a", `1`)}, contract.ENotFound, "", "", ""},
		{"ErrNotObject", state(k, 1, `[1]`, "other", nil), fixture{Op: contract.OpPatch, Set: set("a", `1`)}, contract.EWrongType, "", "", ""},
		{"ErrNull", state(k, 1, `null`, "other", nil), fixture{Op: contract.OpPatch, Set: set("a", `1`)}, contract.EWrongType, "", "", ""},
		{"ErrTooLarge", job, fixture{Op: contract.OpPatch, Set: set("big", `"`+string(make([]byte, 0))+`0123456789"`), MaxValueBytes: 30}, contract.ETooLarge, "", "", ""},
		{"ErrStaleVersion", job, fixture{Op: contract.OpPatch, ExpectedVersion: ptr(3), Set: set("a", `1`)}, contract.EConflict, "", "", ""},
	})
	d := ds["ErrFieldCASLost"]
	if d.Conflict == nil || d.Conflict.Reason != "field_mismatch" || d.Conflict.Op != contract.OpFieldCAS || d.Conflict.ExpectedVersion != -1 {
		t.Errorf("a lost field CAS must be recorded as a conflict: %+v", d.Conflict)
	}
	var e *contract.Error
	if !errors.As(d.Err, &e) || e.Field != "if.equals" || e.Current == nil || e.Current.Version != 4 {
		t.Errorf("field mismatch error %+v", d.Err)
	}
}

func TestDecideLock(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	k := "tenant/a/project/b/lock"
	exp := now.Add(30 * time.Second)
	past := now.Add(-time.Second)
	const valA = `{"holder":"a","token":5,"acquiredAt":"2026-11-22T11:59:00Z","principal":"p"}`
	heldA := state(k, 7, valA, "lock", &exp)
	heldByQ := state(k, 7, `{"holder":"a","token":5,"acquiredAt":"2026-11-22T11:59:00Z","principal":"q"}`, "lock", &exp)
	legacy := func(lastWriter string) keystate.State {
		st := state(k, 7, `{"holder":"a","token":5,"acquiredAt":"2026-11-22T11:59:00Z"}`, "lock", &exp)
		st.Entry.LastWriter = lastWriter
		return st
	}
	forged := state(k, 7, `{"holder":"a","token":9007199254740993,"acquiredAt":"2026-11-22T11:59:00Z","principal":"p"}`, "lock", &exp)
	expiredA := state(k, 7, `{"holder":"a","token":5,"acquiredAt":"2026-11-22T11:59:00Z"}`, "lock", &past)
	released := keystate.State{Version: 8, Entry: contract.Entry{Key: k, Version: 8}}
	leaderA := state(k, 7, valA, "leader", &exp)
	leaderByQ := state(k, 7, `{"holder":"a","token":5,"acquiredAt":"2026-11-22T11:59:00Z","principal":"q"}`, "leader", &exp)
	acq := func(h string) fixture { return fixture{Op: contract.OpLockAcquire, Holder: h, TTLSeconds: 30} }
	queued := func(h string) fixture { f := acq(h); f.Queued = true; return f }
	ds := runOps(t, now, []opsCase{
		{"OKAcquireFree", keystate.State{}, acq("a"), "", contract.OpLockAcquire, `{"holder":"a","token":1,"acquiredAt":"2026-11-22T12:00:00Z","principal":"p"}`, contract.KindPut},
		{"OKAcquireAfterRelease", released, acq("b"), "", contract.OpLockAcquire, `{"holder":"b","token":9,"acquiredAt":"2026-11-22T12:00:00Z","principal":"p"}`, ""},
		{"OKAcquireExpired", expiredA, acq("b"), "", contract.OpLockAcquire, `{"holder":"b","token":8,"acquiredAt":"2026-11-22T12:00:00Z","principal":"p"}`, ""},
		{"OKReenter", heldA, acq("a"), "", contract.OpLockAcquire, valA, ""},
		// Acquires queued behind blocking waiters (writer/waits.go): a
		// free lock is not taken ahead of them; the holder still re-enters.
		{"ErrQueuedAcquireFree", keystate.State{}, queued("b"), contract.ELockHeld, "", "", ""},
		{"ErrQueuedAcquireReleased", released, queued("b"), contract.ELockHeld, "", "", ""},
		{"ErrQueuedAcquireExpired", expiredA, queued("b"), contract.ELockHeld, "", "", ""},
		{"ErrQueuedAcquireHeld", heldA, queued("b"), contract.ELockHeld, "", "", ""},
		{"OKQueuedReenter", heldA, queued("a"), "", contract.OpLockAcquire, valA, ""},
		{"OKQueuedExtend", heldA, fixture{Op: contract.OpLockExtend, Holder: "a", TTLSeconds: 90, Queued: true}, "", contract.OpLockExtend, valA, ""},
		{"OKQueuedRelease", heldA, fixture{Op: contract.OpLockRelease, Holder: "a", Queued: true}, "", contract.OpLockRelease, `null`, contract.KindDelete},
		{"OKExtend", heldA, fixture{Op: contract.OpLockExtend, Holder: "a", TTLSeconds: 90}, "", contract.OpLockExtend, valA, ""},
		{"ErrReenterOtherPrincipal", heldByQ, acq("a"), contract.ELockHeld, "", "", ""},
		{"ErrExtendOtherPrincipal", heldByQ, fixture{Op: contract.OpLockExtend, Holder: "a", TTLSeconds: 30}, contract.ENotLockHolder, "", "", ""},
		{"ErrReleaseOtherPrincipal", heldByQ, fixture{Op: contract.OpLockRelease, Holder: "a"}, contract.ENotLockHolder, "", "", ""},
		{"ErrHeartbeatOtherPrincipal", leaderByQ, fixture{Op: contract.OpLeaderHeartbeat, Holder: "a", TTLSeconds: 10}, contract.ENotLeader, "", "", ""},
		{"ErrResignOtherPrincipal", leaderByQ, fixture{Op: contract.OpLeaderResign, Holder: "a"}, contract.ENotLeader, "", "", ""},
		{"OKReenterLegacyByLastWriter", legacy("p"), acq("a"), "", contract.OpLockAcquire, valA, ""},
		{"ErrReenterLegacyOtherPrincipal", legacy("q"), acq("a"), contract.ELockHeld, "", "", ""},
		{"ErrForgedToken", forged, acq("a"), contract.EWrongType, "", "", ""},
		{"ErrPutPurposeLock", keystate.State{}, fixture{Op: contract.OpPut, Value: json.RawMessage(`{"holder":"s","token":1}`), Semantics: contract.Semantics{Purpose: "lock"}}, contract.EInvalid, "", "", ""},
		{"ErrPatchPurposeLeader", keystate.State{}, fixture{Op: contract.OpPatch, Create: true, Set: map[string]json.RawMessage{"holder": json.RawMessage(`"s"`)}, Semantics: contract.Semantics{Purpose: "leader"}}, contract.EInvalid, "", "", ""},
		{"ErrIncrementPurposeLock", keystate.State{}, fixture{Op: contract.OpIncrement, By: 1, Create: true, Semantics: contract.Semantics{Purpose: "lock"}}, contract.EInvalid, "", "", ""},
		{"ErrPatchLockByVersion", heldA, fixture{Op: contract.OpPatch, ExpectedVersion: ptr(7), Set: map[string]json.RawMessage{"token": json.RawMessage(`0`)}}, contract.EWrongType, "", "", ""},
		{"ErrIncrementLeaderByVersion", leaderA, fixture{Op: contract.OpIncrement, By: 1, ExpectedVersion: ptr(7)}, contract.EWrongType, "", "", ""},
		{"OKBreakLockByPut", heldA, fixture{Op: contract.OpPut, Value: json.RawMessage(`{"holder":"x","token":999999}`), ExpectedVersion: ptr(7)}, "", contract.OpCAS, "", contract.KindPut},
		{"OKRelease", heldA, fixture{Op: contract.OpLockRelease, Holder: "a"}, "", contract.OpLockRelease, `null`, contract.KindDelete},
		{"ErrHeld", heldA, acq("b"), contract.ELockHeld, "", "", ""},
		{"ErrExtendOther", heldA, fixture{Op: contract.OpLockExtend, Holder: "b", TTLSeconds: 30}, contract.ENotLockHolder, "", "", ""},
		{"ErrReleaseOther", heldA, fixture{Op: contract.OpLockRelease, Holder: "b"}, contract.ENotLockHolder, "", "", ""},
		{"ErrReleaseFree", released, fixture{Op: contract.OpLockRelease, Holder: "a"}, contract.ENotLockHolder, "", "", ""},
		{"ErrExtendExpired", expiredA, fixture{Op: contract.OpLockExtend, Holder: "a", TTLSeconds: 30}, contract.ENotLockHolder, "", "", ""},
		{"ErrNotALock", state(k, 3, `{"holder":"a"}`, "other", nil), acq("a"), contract.EWrongType, "", "", ""},
		{"ErrLeaderAsLock", leaderA, acq("a"), contract.EWrongType, "", "", ""},
		{"OKElect", keystate.State{}, fixture{Op: contract.OpLeaderElect, Holder: "a", TTLSeconds: 10}, "", contract.OpLeaderElect, "", ""},
		{"ErrElectOther", leaderA, fixture{Op: contract.OpLeaderElect, Holder: "b", TTLSeconds: 10}, contract.ENotLeader, "", "", ""},
		{"OKHeartbeat", leaderA, fixture{Op: contract.OpLeaderHeartbeat, Holder: "a", TTLSeconds: 10}, "", contract.OpLeaderHeartbeat, "", ""},
		{"ErrHeartbeatOther", leaderA, fixture{Op: contract.OpLeaderHeartbeat, Holder: "b", TTLSeconds: 10}, contract.ENotLeader, "", "", ""},
		{"OKResign", leaderA, fixture{Op: contract.OpLeaderResign, Holder: "a"}, "", contract.OpLeaderResign, "", contract.KindDelete},
		{"ErrPlainPutOverLock", heldA, fixture{Op: contract.OpPut, Value: json.RawMessage(`1`)}, contract.ELockHeld, "", "", ""},
		{"ErrPlainDeleteOfLeader", leaderA, fixture{Op: contract.OpDelete}, contract.ENotLeader, "", "", ""},
		{"OKBreakLockByVersion", heldA, fixture{Op: contract.OpDelete, ExpectedVersion: ptr(7)}, "", contract.OpDelete, "", contract.KindDelete},
		{"OKPutOverExpiredLock", expiredA, fixture{Op: contract.OpPut, Value: json.RawMessage(`1`)}, "", contract.OpSet, "", ""},
	})
	if e := ds["OKAcquireFree"].Event; e.Semantics.Purpose != "lock" || e.ExpiresAt == nil || !e.ExpiresAt.Equal(now.Add(30*time.Second)) {
		t.Errorf("acquire: semantics %+v expiry %v", e.Semantics, e.ExpiresAt)
	}
	if e := ds["OKExtend"].Event; !e.ExpiresAt.Equal(now.Add(90 * time.Second)) {
		t.Errorf("extend: expiry %v", e.ExpiresAt)
	}
	var e *contract.Error
	if !errors.As(ds["ErrHeld"].Err, &e) || e.Current == nil || e.Current.Version != 7 || e.Field != "holder" {
		t.Errorf("lock_held must carry the current lock: %+v", ds["ErrHeld"].Err)
	}
	if e := ds["OKBreakLockByPut"].Event; e.Semantics.Purpose != "other" {
		t.Errorf("a broken lock must not stay a lock: semantics %+v", e.Semantics)
	}
	for _, name := range []string{"ErrPutPurposeLock", "ErrPatchPurposeLeader", "ErrIncrementPurposeLock"} {
		if !errors.As(ds[name].Err, &e) || e.Field != "semantics.purpose" {
			t.Errorf("%s: want field semantics.purpose, got %v", name, ds[name].Err)
		}
	}
	if ds["ErrHeld"].Conflict != nil {
		t.Errorf("lock contention is not a CAS conflict record")
	}
}

func TestDecideExpire(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	k := "tenant/a/project/b/k"
	past := now.Add(-time.Second)
	later := now.Add(time.Minute)
	expired := state(k, 3, `{"holder":"a","token":3}`, "lock", &past)
	expired.Entry.Semantics.Producer = "scheduler"
	exp := fixture{Op: contract.OpExpire, ExpectedVersion: ptr(3)}
	ds := runOps(t, now, []opsCase{
		{"OK", expired, exp, "", contract.OpExpire, `null`, contract.KindExpire},
		{"SkipRenewed", state(k, 4, `1`, "other", &later), fixture{Op: contract.OpExpire, ExpectedVersion: ptr(3)}, contract.EConflict, "", "", ""},
		{"SkipNotYet", state(k, 3, `1`, "other", &later), exp, contract.EConflict, "", "", ""},
		{"SkipDeleted", keystate.State{Version: 4, Entry: contract.Entry{Key: k, Version: 4}}, exp, contract.EConflict, "", "", ""},
		{"SkipNoTTL", state(k, 3, `1`, "other", nil), exp, contract.EConflict, "", "", ""},
	})
	e := ds["OK"].Event
	if e.Semantics.Purpose != "lock" || e.Semantics.Producer != "scheduler" || string(e.Before) != `{"holder":"a","token":3}` || e.ExpiresAt == nil {
		t.Errorf("expire must carry the entry's semantics, value and expiry: %+v", e)
	}
	for name, d := range ds {
		if d.Conflict != nil {
			t.Errorf("%s: a skipped expire is not a conflict record", name)
		}
	}
}

func TestReadCounter(t *testing.T) {
	k := mustKey(t, "tenant/a/project/b/k")
	entry := func(v string) *contract.Entry {
		return &contract.Entry{Key: k.String(), Version: 3, Value: json.RawMessage(v)}
	}
	for _, tc := range []struct {
		name  string
		e     *contract.Entry
		code  string
		value int64
	}{
		{"OK", entry(`41`), "", 41},
		{"OKNegative", entry(`-7`), "", -7},
		{"OKMaxInt64", entry(`9223372036854775807`), "", 9223372036854775807},
		{"ErrAbsent", nil, contract.ENotFound, 0},
		{"ErrString", entry(`"7"`), contract.EWrongType, 0},
		{"ErrFraction", entry(`1.5`), contract.EWrongType, 0},
		{"ErrExponent", entry(`1e3`), contract.EWrongType, 0},
		{"ErrOverInt64", entry(`9223372036854775808`), contract.EWrongType, 0},
		{"ErrObject", entry(`{"n":1}`), contract.EWrongType, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ReadCounter(k, tc.e)
			if contract.ErrorCode(err) != tc.code {
				t.Fatalf("err %v, want code %q", err, tc.code)
			}
			if tc.code == contract.EWrongType {
				var e *contract.Error
				if !errors.As(err, &e) || e.Current != tc.e || e.Field != "value" {
					t.Fatalf("wrong_type %+v, want Current and field value", e)
				}
			}
			if tc.code == "" && a != (contract.CounterAnswer{Key: k.String(), Value: tc.value, Version: 3}) {
				t.Fatalf("answer %+v", a)
			}
		})
	}
}
