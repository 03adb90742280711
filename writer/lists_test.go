package writer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/elemkey"
	"github.com/eskv/eskv/testenv"
)

// TestListsFollowThePartition: pushes, pops and trims decided by one
// owner, then by a new owner of the partition whose overlay was rebuilt
// from the log (nothing is projected here): every pop answers the value
// the fold of the log has at that end.
func TestListsFollowThePartition(t *testing.T) {
	t.Parallel()
	broker := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	a, runA := startWriter(t, broker, store, Config{InstanceID: "a"})
	testenv.WaitFor(t, 30*time.Second, "writer a ready", a.Ready)
	ctx := t.Context()
	list := mustKey(t, "tenant/a/project/b/log")
	push := func(op contract.Op, v string) *decide.List {
		return &decide.List{Header: decide.Header{Key: list, Op: op, Principal: "p"}, Value: json.RawMessage(v)}
	}
	op := func(op contract.Op) *decide.List {
		return &decide.List{Header: decide.Header{Key: list, Op: op, Principal: "p"}}
	}
	trim := func(start, stop int64) *decide.List {
		return &decide.List{Header: decide.Header{Key: list, Op: contract.OpLTrim, Principal: "p"}, Start: start, Stop: stop}
	}
	type step struct {
		r      *decide.List
		value  string // popped, or "" (none)
		length int64
		code   string
	}
	run := func(w *Writer, steps []step) {
		t.Helper()
		for i, s := range steps {
			res, err := w.Do(ctx, s.r)
			if s.code != "" {
				if contract.ErrorCode(err) != s.code {
					t.Fatalf("step %d %s: %+v %v, want %s", i, s.r.Op, res, err, s.code)
				}
				continue
			}
			a := decide.ListAnswer(res)
			if err != nil || a.Length != s.length || (s.r.Op == contract.OpLPop || s.r.Op == contract.OpRPop) && string(a.Value) != s.value {
				t.Fatalf("step %d %s: %+v %v, want value %s length %d", i, s.r.Op, a, err, s.value, s.length)
			}
		}
	}
	run(a, []step{
		{r: op(contract.OpLPop), code: contract.ENotFound},
		{r: push(contract.OpRPush, `"a"`), length: 1},
		{r: push(contract.OpRPush, `"b"`), length: 2},
		{r: push(contract.OpLPush, `{"z":1}`), length: 3}, // z a b
		{r: op(contract.OpLPop), value: `{"z":1}`, length: 2},
		{r: push(contract.OpRPush, `"c"`), length: 3}, // a b c
		{r: push(contract.OpRPush, `"d"`), length: 4}, // a b c d
		{r: trim(1, -1), length: 3},                   // b c d
	})
	if err := runA.Stop(t); err != nil {
		t.Fatalf("writer a: %v", err)
	}
	b := runWriter(t, broker, store, Config{InstanceID: "b"})
	testenv.WaitFor(t, 30*time.Second, "writer b ready", b.Ready)
	run(b, []step{
		{r: op(contract.OpRPop), value: `"d"`, length: 2},
		{r: op(contract.OpLPop), value: `"b"`, length: 1},
		{r: op(contract.OpLPop), value: `"c"`, length: 0},
		{r: op(contract.OpRPop), code: contract.ENotFound},
		{r: push(contract.OpLPush, `"e"`), length: 1},
	})
	st, err := b.State(ctx, list)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := decide.ReadLen(list, st.Visible(time.Now())); err != nil || l.Length != 1 {
		t.Fatalf("llen %+v %v", l, err)
	}
}

// TestRecallRemembersThePoppedValue: the overlay entry after a pop holds
// the value it popped, and recall hands it to the decide.Decision of a retry;
// the entry after any later event forgets it as its latest pop but still
// remembers it with the pop's requestId. The batch's memory does
// the same for a pop decided earlier in the batch.
func TestRecallRemembersThePoppedValue(t *testing.T) {
	t.Parallel()
	key := "tenant/a/project/b/jobs"
	ref := decide.RequestRef{Key: key, RequestID: "R"}
	popEv := &contract.Event{Key: key, Version: 3, Kind: contract.KindPut, Op: contract.OpLPop, RequestID: "R", RequestDigest: "d",
		Element: &contract.Element{Op: contract.ElementRemove, Member: elemkey.ListPosition(0), Value: json.RawMessage(`"a"`)}}
	var o overlayEntry
	o = o.next(popEv, 10, testWindow)
	known := decide.Memory{}
	if ask := recall(ref, &o, known, testWindow, time.Time{}); ask || known[ref].Popped == nil || string(known[ref].Popped.Value) != `"a"` || known[ref].Version != 3 {
		t.Fatalf("recall after the pop: ask %v known %+v, want the popped value at version 3", ask, known[ref])
	}
	o = o.next(&contract.Event{Key: key, Version: 4, Kind: contract.KindPut, Op: contract.OpRPush, RequestID: "S",
		Element: &contract.Element{Op: contract.ElementAdd, Member: elemkey.ListPosition(1), Value: json.RawMessage(`"b"`)}}, 11, testWindow)
	if o.popped != nil {
		t.Fatalf("entry after a push remembers popped %+v", o.popped)
	}
	// The pop is no longer the latest write: its requestId, kept in the
	// entry's recentRequests, still carries the popped value.
	known = decide.Memory{}
	if ask := recall(ref, &o, known, testWindow, time.Time{}); ask || known[ref].Popped == nil || string(known[ref].Popped.Value) != `"a"` || known[ref].Version != 3 {
		t.Fatalf("recall after a later push: ask %v known %+v, want the popped value at version 3", ask, known[ref])
	}
	batch := decide.Memory{}
	batch.Add(popEv)
	if batch[ref].Popped == nil || string(batch[ref].Popped.Value) != `"a"` {
		t.Fatalf("batch memory %+v, want the popped value", batch[ref])
	}
}
