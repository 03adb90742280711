package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/schemas"
	"github.com/eskv/eskv/testenv"
)

func version(v int64) *contract.Condition { return &contract.Condition{Version: &v} }

func exists(b bool) *contract.Condition { return &contract.Condition{Exists: &b} }

func by(n int64) *int64 { return &n }

func putOf(key, value string) client.PutRequest {
	return client.PutRequest{Key: key, Value: json.RawMessage(value)}
}

// TestTxnAppliesAllKeys: a transaction writes every key, each one new
// version, and the log holds its events together: contiguous, sharing
// one txnId and txnSize.
func TestTxnAppliesAllKeys(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := context.Background()
	a, b, log, lock := scope+"txn/a", scope+"txn/b", scope+"txn/log/1", scope+"txn/lock"
	for _, k := range []string{a, b} {
		if _, err := c.Put(ctx, putOf(k, `100`)); err != nil {
			t.Fatal(err)
		}
	}
	// Unrelated writes before and after, so contiguity means something.
	if _, err := c.Put(ctx, putOf(scope+"txn/other", `1`)); err != nil {
		t.Fatal(err)
	}
	ans, err := c.Txn(ctx, contract.TxnBody{Ops: []contract.TxnOp{
		{Op: contract.OpIncrement, Key: a, By: by(-30), Condition: version(1)},
		{Op: contract.OpIncrement, Key: b, By: by(30)},
		{Op: contract.OpPut, Key: log, Value: json.RawMessage(`{"from":"a","to":"b","amount":30}`), Condition: exists(false)},
		{Op: contract.OpCheck, Key: lock, Condition: version(0)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, putOf(scope+"txn/other", `2`)); err != nil {
		t.Fatal(err)
	}
	want := []contract.TxnResult{{Key: a, Version: 2, Value: json.RawMessage(`70`)}, {Key: b, Version: 2, Value: json.RawMessage(`130`)},
		{Key: log, Version: 1, Value: json.RawMessage(`{"from":"a","to":"b","amount":30}`)}, {Key: lock, Version: 0}}
	if ans.TxnID == "" || ans.Replayed || len(ans.Results) != len(want) {
		t.Fatalf("answer %+v", ans)
	}
	for i, r := range ans.Results {
		if r.Key != want[i].Key || r.Version != want[i].Version || string(r.Value) != string(want[i].Value) {
			t.Fatalf("result %d = %+v %s, want %+v %s", i, r, r.Value, want[i], want[i].Value)
		}
	}
	for _, r := range want[:3] {
		e, err := c.Get(ctx, r.Key)
		if err != nil || e.Version != r.Version || string(e.Value) != string(r.Value) {
			t.Fatalf("GET %s = %+v %v, want version %d", r.Key, e, err, r.Version)
		}
	}

	// The log (partition order) holds the three events one after the
	// other, in the order of the ops, and no other event has the id.
	var at []int
	evs := s.readLog(ctx)
	for i, e := range evs {
		if e.TxnID == ans.TxnID {
			at = append(at, i)
		}
	}
	if len(at) != 3 {
		t.Fatalf("%d events carry txnId %s, want 3", len(at), ans.TxnID)
	}
	for j, i := range at {
		e := evs[i]
		if i != at[0]+j || e.TxnSize != 3 || e.Key != want[j].Key || e.Version != want[j].Version {
			t.Fatalf("event %d of the transaction at log position %d (first %d): %s@%d size %d", j, i, at[0], e.Key, e.Version, e.TxnSize)
		}
	}
	waitProjected(t, s)
	for _, r := range want[:3] {
		st, err := s.store.State(ctx, r.Key)
		if err != nil || st.Version != r.Version {
			t.Fatalf("projection of %s: version %d (%v), want %d", r.Key, st.Version, err, r.Version)
		}
	}
}

// TestTxnFailingConditionChangesNothing: a transaction whose third op's
// condition fails leaves every key as it was, appends no event, and
// leaves one conflict record naming the op; the 409 names the op, its
// code, and the key's current version and value.
func TestTxnFailingConditionChangesNothing(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := context.Background()
	a, b, o := scope+"fail/a", scope+"fail/b", scope+"fail/o"
	for _, k := range []string{a, b} {
		if _, err := c.Put(ctx, putOf(k, `5`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Put(ctx, putOf(o, `{"state":"open"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, putOf(o, `{"state":"closed"}`)); err != nil {
		t.Fatal(err)
	}
	before := len(s.readLog(ctx))

	for _, tc := range []struct {
		name  string
		ops   []contract.TxnOp
		code  string
		field string
	}{
		{"ErrStaleVersion", []contract.TxnOp{
			{Op: contract.OpIncrement, Key: a, By: by(1)},
			{Op: contract.OpDelete, Key: b},
			{Op: contract.OpPatch, Key: o, Set: map[string]json.RawMessage{"state": json.RawMessage(`"done"`)}, Condition: version(1)},
		}, contract.EConflict, "ops[2].condition.version"},
		{"ErrFieldCheck", []contract.TxnOp{
			{Op: contract.OpIncrement, Key: a, By: by(1)},
			{Op: contract.OpDelete, Key: b},
			{Op: contract.OpCheck, Key: o, Condition: &contract.Condition{Field: "state", Equals: json.RawMessage(`"open"`)}},
		}, contract.EFieldMismatch, "ops[2].condition.equals"},
		{"ErrIncrementOfObject", []contract.TxnOp{
			{Op: contract.OpIncrement, Key: a, By: by(1)},
			{Op: contract.OpDelete, Key: b},
			{Op: contract.OpIncrement, Key: o, By: by(1)},
		}, contract.EWrongType, "ops[2].value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Txn(ctx, contract.TxnBody{Ops: tc.ops})
			var e *contract.Error
			if !errors.As(err, &e) || e.Code != tc.code || e.FailedOp == nil || *e.FailedOp != 2 || e.Field != tc.field {
				t.Fatalf("want %s at op 2 (%s), got %v", tc.code, tc.field, err)
			}
			if e.Current == nil || e.Current.Key != o || e.Current.Version != 2 || string(e.Current.Value) != `{"state":"closed"}` {
				t.Fatalf("the 409 must carry op 2's key's current entry: %+v", e.Current)
			}
			for k, v := range map[string]int64{a: 1, b: 1, o: 2} {
				if got, err := c.Get(ctx, k); err != nil || got.Version != v {
					t.Fatalf("%s changed: %+v %v", k, got, err)
				}
			}
			var rec *decide.Conflict
			for _, cr := range s.readConflicts(t) {
				if cr.ID == e.CorrelationID {
					rec = &cr
				}
			}
			if rec == nil || rec.TxnID == "" || rec.TxnOp == nil || *rec.TxnOp != 2 || rec.TxnSize != 3 || rec.Key != o || rec.CurrentVersion != 2 {
				t.Fatalf("conflict record %+v", rec)
			}
			if b, err := json.Marshal(rec); err != nil || schemas.ValidateConflict(b) != nil {
				t.Fatalf("the record breaks conflict.v1.json: %v %v\n%s", err, schemas.ValidateConflict(b), b)
			}
			for _, ev := range s.readLog(ctx) {
				if ev.TxnID == rec.TxnID {
					t.Fatalf("the log holds %s@%d of the rejected transaction", ev.Key, ev.Version)
				}
			}
		})
	}
	if after := len(s.readLog(ctx)); after != before {
		t.Fatalf("the log grew from %d to %d events", before, after)
	}
}

// TestTxnCrossProject: keys of two projects are refused with a 400
// naming the op and saying why; nothing is written.
func TestTxnCrossProject(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := context.Background()
	_, err := c.Txn(ctx, contract.TxnBody{Ops: []contract.TxnOp{
		{Op: contract.OpPut, Key: scope + "x", Value: json.RawMessage(`1`)},
		{Op: contract.OpPut, Key: "tenant/acme/project/other/x", Value: json.RawMessage(`1`)},
	}})
	var e *contract.Error
	if !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != "ops[1].key" || *e.FailedOp != 1 || !strings.Contains(e.Message, "one project") {
		t.Fatalf("want 400 on ops[1].key, got %v", err)
	}
	r := s.do("POST", "/v1/txn", devToken, `{"ops":[{"op":"delete","key":"`+scope+`x"},{"op":"delete","key":"tenant/zeta/project/demo/x"}]}`)
	if r.Status != 400 || r.errorBody(t).Field != "ops[1].key" {
		t.Fatalf("HTTP: %d %s", r.Status, r.Body)
	}
	if evs := s.readLog(ctx); len(evs) != 0 {
		t.Fatalf("the log holds %d events", len(evs))
	}
}

// TestTxnReplay: a transaction retried with its requestId is answered as
// a replay (same txnId and results, Eskv-Replayed) and writes no new
// version; the requestId with another body is refused.
func TestTxnReplay(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := context.Background()
	body := contract.TxnBody{RequestID: "move-1", Ops: []contract.TxnOp{
		{Op: contract.OpIncrement, Key: scope + "r/a", By: by(-1), Create: true},
		{Op: contract.OpIncrement, Key: scope + "r/b", By: by(1), Create: true},
		{Op: contract.OpDelete, Key: scope + "r/c", Condition: exists(true)},
	}}
	if _, err := c.Put(ctx, putOf(scope+"r/c", `true`)); err != nil {
		t.Fatal(err)
	}
	first, err := c.Txn(ctx, body)
	if err != nil || first.Replayed {
		t.Fatalf("first: %+v %v", first, err)
	}
	logged := len(s.readLog(ctx))
	again, err := c.Txn(ctx, body)
	if err != nil || !again.Replayed || again.TxnID != first.TxnID {
		t.Fatalf("retry: %+v %v, want a replay of %s", again, err, first.TxnID)
	}
	for i := range first.Results {
		if a, b := first.Results[i], again.Results[i]; a.Key != b.Key || a.Version != b.Version || string(a.Value) != string(b.Value) {
			t.Fatalf("replayed result %d = %+v, want %+v", i, b, a)
		}
	}
	raw := s.do("POST", "/v1/txn", devToken, body)
	if raw.Status != 200 || raw.Header.Get("Eskv-Replayed") != "true" {
		t.Fatalf("HTTP retry: %d %v %s", raw.Status, raw.Header, raw.Body)
	}
	if n := len(s.readLog(ctx)); n != logged {
		t.Fatalf("the retries appended %d events", n-logged)
	}
	if e, err := c.Get(ctx, scope+"r/a"); err != nil || e.Version != 1 || string(e.Value) != "-1" {
		t.Fatalf("r/a after retries: %+v %v", e, err)
	}

	other := body
	other.Ops = body.Ops[:2]
	_, err = c.Txn(ctx, other)
	var e *contract.Error
	if !errors.As(err, &e) || e.Code != contract.EConflict || e.Field != "requestId" {
		t.Fatalf("same requestId, another body: %v", err)
	}
	if n := len(s.readLog(ctx)); n != logged {
		t.Fatalf("the reuse appended %d events", n-logged)
	}

	// A written key changes; once everything is projected (the writer
	// recalls the requestId from the projection's history), a late retry
	// is stale: refused, nothing applied twice.
	if _, err := c.Put(ctx, putOf(scope+"r/a", `7`)); err != nil {
		t.Fatal(err)
	}
	waitProjected(t, s)
	logged = len(s.readLog(ctx))
	_, err = c.Txn(ctx, body)
	if !errors.As(err, &e) || e.Code != contract.EConflict || e.Field != "requestId" || *e.FailedOp != 0 {
		t.Fatalf("stale retry: %v", err)
	}
	var rec *decide.Conflict
	for _, cr := range s.readConflicts(t) {
		if cr.ID == e.CorrelationID {
			rec = &cr
		}
	}
	if rec == nil || rec.Reason != "stale_request" || rec.Key != scope+"r/a" {
		t.Fatalf("conflict record %+v", rec)
	}
	if n := len(s.readLog(ctx)); n != logged {
		t.Fatalf("the stale retry appended %d events", n-logged)
	}
}

// TestTxnConcurrentTransfers: clients move amounts between four counters
// of one project with transactions conditioned on the versions they
// read, so many transactions share the writer's batches with each other
// and with single-key writes. The sum never changes, and in the log each
// transaction's events are adjacent and each key's versions contiguous.
func TestTxnConcurrentTransfers(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := context.Background()
	keys := []string{scope + "acct/0", scope + "acct/1", scope + "acct/2", scope + "acct/3"}
	for _, k := range keys {
		if _, err := c.Put(ctx, putOf(k, `100`)); err != nil {
			t.Fatal(err)
		}
	}
	const clients, transfers = 8, 15
	var (
		mu      sync.Mutex
		applied []contract.TxnAnswer
	)
	var wg sync.WaitGroup
	for cl := range clients {
		wg.Go(func() {
			for n := 0; n < transfers; {
				from, to := keys[(cl+n)%4], keys[(cl+n+1)%4]
				ef, err1 := c.Get(ctx, from)
				et, err2 := c.Get(ctx, to)
				if err1 != nil || err2 != nil {
					t.Errorf("read: %v %v", err1, err2)
					return
				}
				ans, err := c.Txn(ctx, contract.TxnBody{Ops: []contract.TxnOp{
					{Op: contract.OpIncrement, Key: from, By: by(-3), Condition: version(ef.Version)},
					{Op: contract.OpIncrement, Key: to, By: by(3), Condition: version(et.Version)},
				}})
				switch code(err) {
				case "":
					mu.Lock()
					applied = append(applied, ans)
					mu.Unlock()
					n++
				case contract.EConflict:
				default:
					t.Errorf("transfer: %v", err)
					return
				}
			}
		})
	}
	// A single-key writer beside them, on a key of the same project.
	stop := runClients(t, 1, func(_, i int) {
		if _, err := c.Put(ctx, putOf(scope+"acct/note", `"x"`)); err != nil {
			t.Errorf("put: %v", err)
		}
	})
	wg.Wait()
	stop()
	if t.Failed() {
		return
	}
	sum := int64(0)
	for _, k := range keys {
		e, err := c.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		var v int64
		if err := json.Unmarshal(e.Value, &v); err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	if sum != 400 || len(applied) != clients*transfers {
		t.Fatalf("sum %d (want 400) after %d transfers", sum, len(applied))
	}
	evs := s.readLog(ctx)
	pos := map[string][]int{}
	for i, e := range evs {
		if e.TxnID != "" {
			pos[e.TxnID] = append(pos[e.TxnID], i)
		}
	}
	for _, a := range applied {
		if p := pos[a.TxnID]; len(p) != 2 || p[1] != p[0]+1 {
			t.Fatalf("transaction %s at log positions %v, want two adjacent", a.TxnID, p)
		}
	}
	if len(pos) != len(applied) {
		t.Fatalf("%d transactions in the log, %d applied", len(pos), len(applied))
	}
	for _, k := range keys {
		if n := len(keyEvents(t, s, k)); n != 1+2*clients*transfers/4 {
			t.Fatalf("%s has %d events, want %d", k, n, 1+2*clients*transfers/4)
		}
	}
}

// TestTxnDeniedWriteAudited: a transaction refused for a write the token
// may not make is answered 403 naming the op, changes nothing, and leaves
// the denial's audit record (reason forbidden, the op and key refused).
func TestTxnDeniedWriteAudited(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	k := scope + "denied/txn"
	r := s.do("POST", "/v1/txn", readerTok, `{"ops":[{"op":"check","key":"`+k+`","condition":{"exists":false}},{"op":"put","key":"`+k+`2","value":"attempted-secret"}]}`)
	if d := r.errorBody(t); r.Status != 403 || d.FailedOp == nil || *d.FailedOp != 1 || d.Field != "ops[1].key" {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	var got []decide.Conflict
	testenv.WaitFor(t, 30*time.Second, "the denial in kv.conflicts", func() bool {
		got = s.readConflicts(t)
		return len(got) > 0
	})
	if c := got[0]; len(got) != 1 || c.Reason != decide.ReasonForbidden || c.Op != contract.OpPut || c.Key != k+"2" || string(c.Attempted) != "null" {
		t.Fatalf("records %+v", got)
	}
	if evs := s.readLog(t.Context()); len(evs) != 0 {
		t.Fatalf("the log holds %d events", len(evs))
	}
}
