package decide

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

func TestDecideTxn(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const scope = "tenant/a/project/p/"
	live := func(key string, v int64, val string) keystate.State {
		return keystate.State{Version: v, Live: true, Entry: contract.Entry{Key: scope + key, Version: v, Value: json.RawMessage(val),
			CreatedAt: now.Add(-time.Hour), Semantics: contract.Semantics{Purpose: "other"}}}
	}
	lock := live("lock", 7, `{"holder":"h","token":7,"acquiredAt":"2026-11-23T11:00:00Z","principal":"q"}`)
	lock.Entry.Semantics.Purpose = contract.PurposeLock
	states := map[string]keystate.State{
		scope + "a":    live("a", 3, `10`),
		scope + "b":    live("b", 5, `20`),
		scope + "obj":  live("obj", 2, `{"s":"open","n":1}`),
		scope + "str":  live("str", 1, `"text"`),
		scope + "gone": {Version: 4, Entry: contract.Entry{Key: scope + "gone", Version: 4}},
		scope + "lock": lock,
	}
	type step struct {
		op   contract.Op
		key  string
		cond *contract.Condition
		mod  func(*fixture)
	}
	version := func(v int64) *contract.Condition { return &contract.Condition{Version: &v} }
	exists := func(b bool) *contract.Condition { return &contract.Condition{Exists: &b} }
	field := func(f, eq string) *contract.Condition {
		return &contract.Condition{Field: f, Equals: json.RawMessage(eq)}
	}
	put := func(v string) func(*fixture) { return func(r *fixture) { r.Value = json.RawMessage(v) } }
	by := func(n int64) func(*fixture) { return func(r *fixture) { r.By = n } }
	build := func(requestID string, steps []step) *fixture {
		r := &fixture{Op: contract.OpTxn, RequestID: requestID, Principal: "p"}
		for _, s := range steps {
			k := mustKey(t, scope+s.key)
			sub := &fixture{Key: k, Op: s.op, Principal: "p"}
			if s.mod != nil {
				s.mod(sub)
			}
			if s.cond != nil && s.op != contract.OpCheck {
				sub.ExpectedVersion = s.cond.Version
				if s.cond.Exists != nil && !*s.cond.Exists {
					sub.ExpectedVersion = ptr(0)
				}
			}
			r.Txn = append(r.Txn, fixtureStep{Req: sub, Cond: s.cond})
		}
		r.Key = r.Txn[0].Req.Key
		return r
	}
	// applied returns states after the Decision's events.
	applied := func(d Decision) map[string]keystate.State {
		out := make(map[string]keystate.State, len(states))
		for k, s := range states {
			out[k] = s
		}
		for _, ev := range d.Txn {
			out[ev.Key] = keystate.FromEvent(ev)
		}
		return out
	}
	transfer := []step{
		{contract.OpIncrement, "a", version(3), by(-5)},
		{contract.OpIncrement, "b", version(5), by(5)},
		{contract.OpPut, "new", exists(false), put(`{"s":"x"}`)},
		{contract.OpPatch, "obj", field("s", `"open"`), func(r *fixture) {
			r.Set = map[string]json.RawMessage{"s": json.RawMessage(`"closed"`)}
			r.If = &contract.FieldCondition{Field: "s", Equals: json.RawMessage(`"open"`)}
		}},
		{contract.OpDelete, "str", exists(true), nil},
		{contract.OpCheck, "lock", version(7), nil},
	}

	for _, tc := range []struct {
		name     string
		states   map[string]keystate.State
		req      *fixture
		code     string // "" when applied
		failedOp int
		field    string
		reason   string // of the conflict record
		versions []int64
	}{
		{name: "OKAllApply", req: build("", transfer), versions: []int64{4, 6, 1, 3, 2, 7}},
		{name: "OKCheckOnly", req: build("", []step{{contract.OpCheck, "a", version(3), nil}, {contract.OpCheck, "missing", exists(false), nil}}), versions: []int64{3, 0}},
		{name: "OKFieldEqualsNullOnAbsent", req: build("", []step{{contract.OpCheck, "missing", field("f", `null`), nil}}), versions: []int64{0}},
		{name: "OKFieldEqualsCanonical", req: build("", []step{{contract.OpCheck, "obj", field("n", `1.0`), nil}, {contract.OpPut, "a", field("x", `null`), put(`1`)}}), versions: []int64{2, 4}},
		{name: "OKRecreateDeleted", req: build("", []step{{contract.OpPut, "gone", version(0), put(`1`)}}), versions: []int64{5}},
		{name: "ErrFirstFailingOpNamed", req: build("", []step{
			{contract.OpPut, "a", version(3), put(`1`)},
			{contract.OpPut, "b", version(4), put(`1`)}, // stale: fails first
			{contract.OpCheck, "obj", version(9), nil},  // would fail too
		}), code: contract.EConflict, failedOp: 1, field: "ops[1].condition.version", reason: "version_mismatch"},
		{name: "ErrCheckFails", req: build("", []step{{contract.OpPut, "a", nil, put(`1`)}, {contract.OpCheck, "lock", version(6), nil}}),
			code: contract.EConflict, failedOp: 1, field: "ops[1].condition.version", reason: "version_mismatch"},
		{name: "ErrExistsFalse", req: build("", []step{{contract.OpPut, "a", exists(false), put(`1`)}}),
			code: contract.EConflict, failedOp: 0, field: "ops[0].condition.exists", reason: "version_mismatch"},
		{name: "ErrExistsTrueOnDeleted", req: build("", []step{{contract.OpCheck, "gone", exists(true), nil}}),
			code: contract.EConflict, failedOp: 0, field: "ops[0].condition.exists", reason: "version_mismatch"},
		{name: "ErrFieldEquals", req: build("", []step{{contract.OpPut, "b", nil, put(`1`)}, {contract.OpCheck, "obj", field("s", `"closed"`), nil}}),
			code: contract.EFieldMismatch, failedOp: 1, field: "ops[1].condition.equals", reason: "field_mismatch"},
		{name: "ErrIncrementWrongType", req: build("", []step{{contract.OpPut, "a", nil, put(`1`)}, {contract.OpIncrement, "str", nil, by(1)}}),
			code: contract.EWrongType, failedOp: 1, field: "ops[1].value", reason: contract.EWrongType},
		// Bounds: a step's increment refused by its min is the step's
		// failure; nothing of the transaction applies.
		{name: "ErrIncrementBelowMin", req: build("", []step{{contract.OpIncrement, "b", nil, by(5)}, {contract.OpIncrement, "a", nil, func(r *fixture) { r.By, r.Min = -11, ptr(0) }}}),
			code: contract.EOutOfRange, failedOp: 1, field: "ops[1].min", reason: contract.EOutOfRange},
		{name: "OKIncrementWithinBounds", req: build("", []step{{contract.OpIncrement, "a", nil, func(r *fixture) { r.By, r.Min, r.Max = -10, ptr(0), ptr(10) }}}), versions: []int64{4}},
		{name: "ErrDeleteAbsent", req: build("", []step{{contract.OpDelete, "gone", nil, nil}}),
			code: contract.ENotFound, failedOp: 0, field: "ops[0].key", reason: contract.ENotFound},
		{name: "ErrLockNotWritable", req: build("", []step{{contract.OpPut, "lock", version(7), put(`1`)}}),
			code: contract.EWrongType, failedOp: 0, field: "ops[0].key", reason: contract.EWrongType},
		// Fenced writes: a check of the lock's token holds while its
		// tenure lasts.
		{name: "OKCheckLockToken", req: build("", []step{{contract.OpPut, "a", nil, put(`1`)}, {contract.OpCheck, "lock", field("token", `7`), nil}}), versions: []int64{4, 7}},
		{name: "ErrCheckStaleLockToken", req: build("", []step{{contract.OpPut, "a", nil, put(`1`)}, {contract.OpCheck, "lock", field("token", `6`), nil}}),
			code: contract.EFieldMismatch, failedOp: 1, field: "ops[1].condition.equals", reason: "field_mismatch"},
		// The API refuses a key twice (400); decided anyway, the second
		// step sees the first.
		{name: "OKDuplicateKeyInOrder", req: build("", []step{{contract.OpIncrement, "a", nil, by(1)}, {contract.OpIncrement, "a", version(4), by(1)}}), versions: []int64{4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.states
			if st == nil {
				st = states
			}
			before := len(st)
			d := decideTxn(txnOf(tc.req), Input{States: st}, testEnv(now, 9))
			if len(st) != before || st[scope+"a"].Version != 3 {
				t.Fatalf("DecideTxn changed its input states")
			}
			if tc.code != "" {
				var e *contract.Error
				if !errors.As(d.Err, &e) || e.Code != tc.code || len(d.Txn) != 0 || d.Event != nil {
					t.Fatalf("want %s and no event, got %v, %d events", tc.code, d.Err, len(d.Txn))
				}
				if e.FailedOp == nil || *e.FailedOp != tc.failedOp || e.Field != tc.field {
					t.Fatalf("failedOp %v field %q, want %d %q", e.FailedOp, e.Field, tc.failedOp, tc.field)
				}
				c := d.Conflict
				if c == nil || c.TxnOp == nil || *c.TxnOp != tc.failedOp || c.TxnSize != len(tc.req.Txn) || c.TxnID == "" ||
					c.Key != tc.req.Txn[tc.failedOp].Req.Key.String() || c.Reason != tc.reason || c.ID != e.CorrelationID {
					t.Fatalf("conflict record %+v (error %v)", c, e)
				}
				if cs := st[c.Key]; cs.Visible(now) != nil && (e.Current == nil || e.Current.Version != cs.Version || c.CurrentVersion != cs.Version) {
					t.Fatalf("the error and record must carry the current version %d: %+v, record %d", cs.Version, e.Current, c.CurrentVersion)
				}
				return
			}
			if d.Err != nil {
				t.Fatalf("want applied, got %v", d.Err)
			}
			writes := 0
			for i, s := range tc.req.Txn {
				if got := d.Result.Txn[i]; got.Key != s.Req.Key.String() || got.Version != tc.versions[i] {
					t.Fatalf("result %d = %+v, want version %d", i, got, tc.versions[i])
				}
				if s.Req.Op != contract.OpCheck {
					writes++
				}
			}
			if len(d.Txn) != writes {
				t.Fatalf("%d events for %d writes", len(d.Txn), writes)
			}
			for _, ev := range d.Txn {
				if ev.TxnID != d.Result.TxnID || ev.TxnSize != writes || ev.RequestDigest != tc.req.Digest() || ev.WriterEpoch != 9 {
					t.Fatalf("event %s@%d: txnId %q size %d digest %q, want %q %d", ev.Key, ev.Version, ev.TxnID, ev.TxnSize, ev.RequestDigest, d.Result.TxnID, writes)
				}
			}
			if writes > 0 && d.Result.TxnID != txnID(d.Txn[0].Key, d.Txn[0].Version) {
				t.Fatalf("txnId %s is not derived from the first event", d.Result.TxnID)
			}
		})
	}

	t.Run("OKEventsNameTheOps", func(t *testing.T) {
		d := decideTxn(txnOf(build("", transfer)), Input{States: states}, testEnv(now, 9))
		want := []contract.Op{contract.OpIncrement, contract.OpIncrement, contract.OpCreate, contract.OpFieldCAS, contract.OpDelete}
		for i, ev := range d.Txn {
			if ev.Op != want[i] {
				t.Fatalf("event %d op %s, want %s", i, ev.Op, want[i])
			}
		}
		if string(d.Result.Txn[0].Value) != "5" || d.Result.Txn[4].Value != nil || d.Result.Txn[5].Value != nil {
			t.Fatalf("results %+v: values of writes that leave one, none for delete and check", d.Result.Txn)
		}
	})

	t.Run("ReplayAndReuse", func(t *testing.T) {
		first := decideTxn(txnOf(build("rq-1", transfer)), Input{States: states}, testEnv(now, 9))
		if first.Err != nil || first.Result.Replayed {
			t.Fatalf("first: %v", first.Err)
		}
		after := applied(first)
		again := decideTxn(txnOf(build("rq-1", transfer)), Input{States: after}, testEnv(now.Add(time.Second), 9))
		if again.Err != nil || !again.Result.Replayed || len(again.Txn) != 0 || again.Conflict != nil {
			t.Fatalf("retry: want a replay appending nothing, got %v replayed %v, %d events", again.Err, again.Result.Replayed, len(again.Txn))
		}
		if again.Result.TxnID != first.Result.TxnID {
			t.Fatalf("replayed txnId %s, want %s", again.Result.TxnID, first.Result.TxnID)
		}
		for i := range first.Result.Txn {
			if a, b := first.Result.Txn[i], again.Result.Txn[i]; a.Key != b.Key || a.Version != b.Version || string(a.Value) != string(b.Value) {
				t.Fatalf("replayed result %d = %+v, want %+v", i, b, a)
			}
		}

		other := build("rq-1", transfer[:2])
		reuse := decideTxn(txnOf(other), Input{States: after}, testEnv(now, 9))
		var e *contract.Error
		if !errors.As(reuse.Err, &e) || e.Code != contract.EConflict || e.Field != "requestId" || reuse.Conflict.Reason != "request_id_reused" || len(reuse.Txn) != 0 {
			t.Fatalf("same requestId, another body: want version_conflict on requestId, got %v %+v", reuse.Err, reuse.Conflict)
		}

		// A key the transaction wrote changed since: the retry is
		// neither replayed nor applied twice.
		changed := applied(first)
		b := changed[scope+"b"]
		b.Version, b.Entry.Version, b.Entry.RequestID, b.RequestDigest = 7, 7, "", ""
		changed[scope+"b"] = b
		partial := decideTxn(txnOf(build("rq-1", transfer)), Input{States: changed}, testEnv(now, 9))
		if !errors.As(partial.Err, &e) || e.Field != "requestId" || *e.FailedOp != 1 || len(partial.Txn) != 0 || partial.Conflict.Reason != "stale_request" {
			t.Fatalf("partly overwritten: want stale_request at op 1, got %v", partial.Err)
		}

		// Every written key changed since, and the window remembers the
		// transaction's use of the requestId on them (requestid.go): a
		// stale retry, refused at the first key; another body under the
		// id is request_id_reused.
		overwritten := applied(first)
		known := Memory{}
		for _, ev := range first.Txn {
			known.Add(ev)
			st := overwritten[ev.Key]
			st.Version, st.Entry.Version, st.Entry.RequestID, st.RequestDigest = st.Version+1, st.Version+1, "", ""
			overwritten[ev.Key] = st
		}
		stale := decideTxn(txnOf(build("rq-1", transfer)), Input{States: overwritten, Known: known}, testEnv(now, 9))
		if !errors.As(stale.Err, &e) || e.Field != "requestId" || *e.FailedOp != 0 || len(stale.Txn) != 0 || stale.Conflict.Reason != "stale_request" {
			t.Fatalf("stale retry: want stale_request at op 0, got %v %+v", stale.Err, stale.Conflict)
		}
		if r := decideTxn(txnOf(build("rq-1", transfer[:2])), Input{States: overwritten, Known: known}, testEnv(now, 9)); r.Conflict == nil || r.Conflict.Reason != "request_id_reused" {
			t.Fatalf("another body under a remembered id: %v", r.Err)
		}
		if r := decideTxn(txnOf(build("rq-1", transfer)), Input{States: overwritten, Known: known}, testEnvW(now, 9, RequestWindow{Versions: 1})); r.Conflict != nil && r.Conflict.Reason == "stale_request" && *r.Conflict.TxnOp == 0 {
			t.Fatalf("a window of 1 remembers only the latest write: %v", r.Err)
		}
	})
}

func TestTxnDigest(t *testing.T) {
	k := mustKey(t, "tenant/a/project/p/k")
	mk := func(principal string, cond *contract.Condition) *fixture {
		return &fixture{Op: contract.OpTxn, Key: k, Principal: principal, Txn: []fixtureStep{{Req: &fixture{Key: k, Op: contract.OpCheck, Principal: principal}, Cond: cond}}}
	}
	yes, no := true, false
	a, b, c := mk("p", &contract.Condition{Exists: &yes}), mk("p", &contract.Condition{Exists: &no}), mk("q", &contract.Condition{Exists: &yes})
	if a.Digest() == b.Digest() || a.Digest() == c.Digest() || a.Digest() != mk("p", &contract.Condition{Exists: &yes}).Digest() {
		t.Fatalf("the digest must cover conditions and the principal, and be stable")
	}
}

// TestTxnIDIsUUIDv5: txnID is the UUIDv5 (uuid.NewSHA1) transaction ids
// were first written as, so replays of transactions logged before still
// find theirs.
func TestTxnIDIsUUIDv5(t *testing.T) {
	ns := uuid.MustParse("0b6c6a9e-2f55-4f7e-9a8e-6f2b1c3d4e5f")
	for _, c := range []struct {
		key     string
		version int64
	}{{"tenant/a/project/b/k", 1}, {"tenant/a/project/b/ü", 1 << 40}, {"", 0}} {
		want := uuid.NewSHA1(ns, []byte(c.key+"\x00"+strconv.FormatInt(c.version, 10))).String()
		if got := txnID(c.key, c.version); got != want {
			t.Fatalf("txnID(%q, %d) = %s, want %s", c.key, c.version, got, want)
		}
	}
}
