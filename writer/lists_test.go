package writer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestDecideList: pushes, pops and trims against the list's metadata and
// the one element a pop removes: the position each writes, the new
// metadata, and when nothing is appended.
func TestDecideList(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/activity-log")
	list := func(v, head, size, since int64) contract.State {
		meta, _ := json.Marshal(contract.CollectionMeta{Type: "list", Size: size, Since: since, Head: head})
		return contract.State{Version: v, Live: true, Entry: contract.Entry{Key: key.String(), Version: v, Value: meta,
			CreatedAt: now.Add(-time.Hour), Semantics: contract.Semantics{Purpose: "list"}}}
	}
	deleted := contract.State{Version: 9, Entry: contract.Entry{Key: key.String(), Version: 9}}
	set := contract.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: json.RawMessage(`{"type":"set","size":1,"since":1}`),
		Semantics: contract.Semantics{Purpose: "set"}}}
	v := json.RawMessage(`"x"`)
	head := listElem{version: 4, value: json.RawMessage(`"h"`)}
	meta := func(head, size, since int64) *contract.CollectionMeta {
		return &contract.CollectionMeta{Type: "list", Size: size, Since: since, Head: head}
	}
	el := func(op string, pos int64, value string) *contract.Element {
		return &contract.Element{Op: op, Member: projection.ListPosition(pos), Value: json.RawMessage(value)}
	}
	for _, tc := range []struct {
		name    string
		cur     contract.State
		end     listElem
		req     Request
		code    string                   // error code, or "" when accepted
		meta    *contract.CollectionMeta // after; nil: nothing appended
		element *contract.Element
	}{
		{"OKLPushCreates", contract.State{}, listElem{}, Request{Op: contract.OpLPush, Value: v}, "", meta(-1, 1, 1), el("add", -1, `"x"`)},
		{"OKRPushCreates", contract.State{}, listElem{}, Request{Op: contract.OpRPush, Value: v}, "", meta(0, 1, 1), el("add", 0, `"x"`)},
		{"OKLPushWritesHeadMinusOne", list(5, 10, 3, 1), listElem{}, Request{Op: contract.OpLPush, Value: v}, "", meta(9, 4, 1), el("add", 9, `"x"`)},
		{"OKRPushWritesTailPlusOne", list(5, 10, 3, 1), listElem{}, Request{Op: contract.OpRPush, Value: v}, "", meta(10, 4, 1), el("add", 13, `"x"`)},
		{"OKPushAfterDeleteStartsAfresh", deleted, listElem{}, Request{Op: contract.OpRPush, Value: v}, "", meta(0, 1, 10), el("add", 0, `"x"`)},
		{"OKLPopRemovesHead", list(5, 10, 3, 1), head, Request{Op: contract.OpLPop}, "", meta(11, 2, 1), el("remove", 10, `"h"`)},
		{"OKRPopRemovesTail", list(5, 10, 3, 1), head, Request{Op: contract.OpRPop}, "", meta(10, 2, 1), el("remove", 12, `"h"`)},
		{"OKPopLastLeavesEmptyList", list(5, -3, 1, 1), head, Request{Op: contract.OpLPop}, "", meta(-2, 0, 1), el("remove", -3, `"h"`)},
		{"ErrPopEmpty", list(5, 10, 0, 1), listElem{}, Request{Op: contract.OpLPop}, contract.ENotFound, nil, nil},
		{"ErrPopMissing", contract.State{}, listElem{}, Request{Op: contract.OpRPop}, contract.ENotFound, nil, nil},
		{"ErrPopRowOfEarlierList", list(12, 0, 1, 10), head, Request{Op: contract.OpLPop}, contract.EInternal, nil, nil},
		{"OKTrimKeepsFirst", list(5, 10, 5, 1), listElem{}, Request{Op: contract.OpLTrim, Start: 0, Stop: 1}, "", meta(10, 2, 1), nil},
		{"OKTrimKeepsLast", list(5, 10, 5, 1), listElem{}, Request{Op: contract.OpLTrim, Start: -2, Stop: -1}, "", meta(13, 2, 1), nil},
		{"OKTrimKeepsNone", list(5, 10, 5, 1), listElem{}, Request{Op: contract.OpLTrim, Start: 3, Stop: 1}, "", meta(15, 0, 1), nil},
		{"OKTrimKeepsAllChangesNothing", list(5, 10, 5, 1), listElem{}, Request{Op: contract.OpLTrim, Start: 0, Stop: 999}, "", nil, nil},
		{"OKTrimMissingChangesNothing", contract.State{}, listElem{}, Request{Op: contract.OpLTrim, Start: 0, Stop: 1}, "", nil, nil},
		{"OKTrimEmptyChangesNothing", list(5, 10, 0, 1), listElem{}, Request{Op: contract.OpLTrim, Start: 0, Stop: 1}, "", nil, nil},
		{"OKBlindTrimKeepingAllAppends", list(5, 10, 5, 1), listElem{}, Request{Op: contract.OpLTrim, Start: 0, Stop: 999, Blind: true}, "", meta(10, 5, 1), nil},
		{"OKBlindTrimOfEmptyAppends", list(5, 10, 0, 1), listElem{}, Request{Op: contract.OpLTrim, Start: 0, Stop: 1, Blind: true}, "", meta(10, 0, 1), nil},
		{"OKBlindTrimKeepsFirst", list(5, 10, 5, 1), listElem{}, Request{Op: contract.OpLTrim, Start: 0, Stop: 1, Blind: true}, "", meta(10, 2, 1), nil},
		{"OKBlindTrimMissingChangesNothing", contract.State{}, listElem{}, Request{Op: contract.OpLTrim, Start: 0, Stop: 1, Blind: true}, "", nil, nil},
		{"ErrExpectedVersion", list(5, 10, 3, 1), listElem{}, Request{Op: contract.OpRPush, Value: v, ExpectedVersion: ptr(4)}, contract.EConflict, nil, nil},
		{"ErrPushNotAList", set, listElem{}, Request{Op: contract.OpLPush, Value: v}, contract.EWrongType, nil, nil},
		{"ErrPopNotAList", set, listElem{}, Request{Op: contract.OpLPop}, contract.EWrongType, nil, nil},
		{"ErrTrimNotAList", set, listElem{}, Request{Op: contract.OpLTrim, Stop: 1}, contract.EWrongType, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Principal = key, "p"
			d := DecideList(tc.cur, tc.end, requestMemory{}, &r, now, 1, testWindow)
			if tc.code != "" {
				if contract.ErrorCode(d.err) != tc.code || d.event != nil {
					t.Fatalf("error %v event %v, want %s and nothing appended", d.err, d.event, tc.code)
				}
				return
			}
			if d.err != nil {
				t.Fatal(d.err)
			}
			if (d.event != nil) != (tc.meta != nil) || d.result.Changed != (tc.meta != nil) {
				t.Fatalf("event %+v changed %v, want appended %v", d.event, d.result.Changed, tc.meta != nil)
			}
			if tc.meta == nil {
				return
			}
			ev := d.event
			got, err := contract.ParseCollectionMeta(ev.After)
			if err != nil || got != *tc.meta {
				t.Fatalf("metadata %s (%v), want %+v", ev.After, err, *tc.meta)
			}
			if ev.Version != tc.cur.Version+1 || ev.Op != r.Op || ev.Semantics.Purpose != "list" {
				t.Fatalf("event %+v", ev)
			}
			switch {
			case tc.element == nil && ev.Element != nil:
				t.Fatalf("element %+v, want none", ev.Element)
			case tc.element != nil && (ev.Element == nil || ev.Element.Op != tc.element.Op || ev.Element.Member != tc.element.Member || string(ev.Element.Value) != string(tc.element.Value)):
				t.Fatalf("element %+v, want %+v", ev.Element, tc.element)
			}
			if a := ListAnswer(d.result); a.Length != tc.meta.Size || a.Version != ev.Version || (tc.element != nil && string(a.Value) != string(tc.element.Value)) {
				t.Fatalf("answer %+v", a)
			}
		})
	}

	t.Run("OKPopRefNamesTheEnd", func(t *testing.T) {
		for op, pos := range map[contract.Op]int64{contract.OpLPop: 10, contract.OpRPop: 12} {
			ref, ok := popRef(list(5, 10, 3, 1), &Request{Key: key, Op: op}, now)
			if !ok || ref.Member != projection.ListPosition(pos) || ref.Collection != key.String() {
				t.Errorf("%s: popRef = %+v %v, want position %d", op, ref, ok, pos)
			}
		}
		if _, ok := popRef(list(5, 10, 0, 1), &Request{Key: key, Op: contract.OpLPop}, now); ok {
			t.Error("popRef of an empty list names an element")
		}
		if _, ok := popRef(list(5, 10, 3, 1), &Request{Key: key, Op: contract.OpRPush}, now); ok {
			t.Error("popRef of a push names an element")
		}
	})
	t.Run("OKTrimDigestNamesItsRange", func(t *testing.T) {
		a := Request{Key: key, Op: contract.OpLTrim, Start: 0, Stop: 9}
		b := a
		b.Stop = 99
		if a.Digest() == b.Digest() {
			t.Error("two trims of different ranges have one digest")
		}
	})
}

// TestListsFollowThePartition: pushes, pops and trims decided by one
// owner, then by a new owner of the partition whose overlay was rebuilt
// from the log (nothing is projected here): every pop answers the value
// the fold of the log has at that end.
func TestListsFollowThePartition(t *testing.T) {
	broker := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	a, runA := startWriter(t, broker, store, Config{InstanceID: "a"})
	testenv.WaitFor(t, 30*time.Second, "writer a ready", a.Ready)
	ctx := t.Context()
	list := mustKey(t, "tenant/a/project/b/log")
	push := func(op contract.Op, v string) *Request {
		return &Request{Key: list, Op: op, Value: json.RawMessage(v), Principal: "p"}
	}
	op := func(op contract.Op) *Request { return &Request{Key: list, Op: op, Principal: "p"} }
	trim := func(start, stop int64) *Request {
		return &Request{Key: list, Op: contract.OpLTrim, Start: start, Stop: stop, Principal: "p"}
	}
	type step struct {
		r      *Request
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
			a := ListAnswer(res)
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
	if l, err := ReadLen(list, st.Visible(time.Now())); err != nil || l.Length != 1 {
		t.Fatalf("llen %+v %v", l, err)
	}
}

// TestDecideListReplayedPop: a retry of the list's latest write, a pop,
// answers the value it popped (known from the overlay, the batch or
// kv_history), the list's length and version after it, and appends
// nothing; without the value (history retention) it is still a replay.
// An older pop retried (the list was written since) answers the value it
// popped and the version and length after it; without the value it is
// stale, as an older push is; a replayed push answers no element.
func TestDecideListReplayedPop(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/jobs")
	pop := &Request{Key: key, Op: contract.OpLPop, RequestID: "R", Principal: "p"}
	push := &Request{Key: key, Op: contract.OpRPush, Value: json.RawMessage(`"x"`), RequestID: "P", Principal: "p"}
	after := func(r *Request, v int64) contract.State {
		return contract.State{Version: v, Live: true, RequestDigest: r.Digest(), Entry: contract.Entry{Key: key.String(), Version: v,
			Value: json.RawMessage(`{"type":"list","size":2,"since":1,"head":1}`), RequestID: r.RequestID, Semantics: contract.Semantics{Purpose: "list"}}}
	}
	ref := projection.RequestRef{Key: key.String(), RequestID: "R"}
	popped := &contract.Element{Op: contract.ElementRemove, Member: projection.ListPosition(1), Value: json.RawMessage(`{"job":7}`)}
	for _, tc := range []struct {
		name  string
		cur   contract.State
		known requestMemory
		r     *Request
		value string // answered; "" none
		code  string
	}{
		{"OKReplayAnswersThePoppedValue", after(pop, 5), requestMemory{ref: {Version: 5, Digest: pop.Digest(), Popped: popped}}, pop, `{"job":7}`, ""},
		{"OKReplayWithoutKnownValueAnswersNone", after(pop, 5), requestMemory{}, pop, "", ""},
		{"OKReplayIgnoresTheValueOfAnotherVersion", after(pop, 5), requestMemory{ref: {Version: 4, Digest: pop.Digest(), Popped: popped}}, pop, "", ""},
		{"OKReplayedPushAnswersNoElement", after(push, 5), requestMemory{}, push, "", ""},
		{"OKOlderPopAnswersThePoppedValue", after(push, 6), requestMemory{ref: {Version: 5, Digest: pop.Digest(), Popped: popped, After: after(pop, 5).Entry.Value}}, pop, `{"job":7}`, ""},
		{"ErrOlderPopWithoutValueIsStale", after(push, 6), requestMemory{ref: {Version: 5, Digest: pop.Digest()}}, pop, "", contract.EConflict},
		{"ErrOlderPushIsStale", after(pop, 6), requestMemory{projection.RequestRef{Key: key.String(), RequestID: "P"}: {Version: 5, Digest: push.Digest()}}, push, "", contract.EConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideList(tc.cur, listElem{}, tc.known, tc.r, now, 1, testWindow)
			if tc.code != "" {
				if contract.ErrorCode(d.err) != tc.code || d.event != nil {
					t.Fatalf("error %v event %v, want %s and nothing appended", d.err, d.event, tc.code)
				}
				return
			}
			if d.err != nil || d.event != nil || !d.result.Replayed || !d.result.Changed {
				t.Fatalf("decision %+v, want a replay appending nothing", d)
			}
			a := ListAnswer(d.result)
			if string(a.Value) != tc.value || a.Length != 2 || a.Version != 5 {
				t.Fatalf("answer %+v (value %s), want value %q length 2 version 5", a, a.Value, tc.value)
			}
		})
	}
}

// TestRecallRemembersThePoppedValue: the overlay entry after a pop holds
// the value it popped, and recall hands it to the decision of a retry;
// the entry after any later event forgets it as its latest pop but still
// remembers it with the pop's requestId. The batch's memory does
// the same for a pop decided earlier in the batch.
func TestRecallRemembersThePoppedValue(t *testing.T) {
	key := "tenant/a/project/b/jobs"
	ref := projection.RequestRef{Key: key, RequestID: "R"}
	popEv := &contract.Event{Key: key, Version: 3, Kind: contract.KindPut, Op: contract.OpLPop, RequestID: "R", RequestDigest: "d",
		Element: &contract.Element{Op: contract.ElementRemove, Member: projection.ListPosition(0), Value: json.RawMessage(`"a"`)}}
	var o overlayEntry
	o = o.next(popEv, 10, testWindow)
	known := requestMemory{}
	if ask := recall(ref, o, true, known, testWindow, time.Time{}); ask || known[ref].Popped == nil || string(known[ref].Popped.Value) != `"a"` || known[ref].Version != 3 {
		t.Fatalf("recall after the pop: ask %v known %+v, want the popped value at version 3", ask, known[ref])
	}
	o = o.next(&contract.Event{Key: key, Version: 4, Kind: contract.KindPut, Op: contract.OpRPush, RequestID: "S",
		Element: &contract.Element{Op: contract.ElementAdd, Member: projection.ListPosition(1), Value: json.RawMessage(`"b"`)}}, 11, testWindow)
	if o.popped != nil {
		t.Fatalf("entry after a push remembers popped %+v", o.popped)
	}
	// The pop is no longer the latest write: its requestId, kept in the
	// entry's recentRequests, still carries the popped value.
	known = requestMemory{}
	if ask := recall(ref, o, true, known, testWindow, time.Time{}); ask || known[ref].Popped == nil || string(known[ref].Popped.Value) != `"a"` || known[ref].Version != 3 {
		t.Fatalf("recall after a later push: ask %v known %+v, want the popped value at version 3", ask, known[ref])
	}
	batch := requestMemory{}
	batch.add(popEv)
	if batch[ref].Popped == nil || string(batch[ref].Popped.Value) != `"a"` {
		t.Fatalf("batch memory %+v, want the popped value", batch[ref])
	}
}
