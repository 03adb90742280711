package decide

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/elemkey"
	"github.com/eskv/eskv/projection/keystate"
)

// TestDecideList: pushes, pops and trims against the list's metadata and
// the one element a pop removes: the position each writes, the new
// metadata, and when nothing is appended.
func TestDecideList(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/activity-log")
	list := func(v, head, size, since int64) keystate.State {
		meta, _ := json.Marshal(contract.CollectionMeta{Type: "list", Size: size, Since: since, Head: head})
		return keystate.State{Version: v, Live: true, Entry: contract.Entry{Key: key.String(), Version: v, Value: meta,
			CreatedAt: now.Add(-time.Hour), Semantics: contract.Semantics{Purpose: "list"}}}
	}
	deleted := keystate.State{Version: 9, Entry: contract.Entry{Key: key.String(), Version: 9}}
	set := keystate.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: json.RawMessage(`{"type":"set","size":1,"since":1}`),
		Semantics: contract.Semantics{Purpose: "set"}}}
	v := json.RawMessage(`"x"`)
	head := ElementRow{Version: 4, Value: json.RawMessage(`"h"`)}
	meta := func(head, size, since int64) *contract.CollectionMeta {
		return &contract.CollectionMeta{Type: "list", Size: size, Since: since, Head: head}
	}
	el := func(op string, pos int64, value string) *contract.Element {
		return &contract.Element{Op: op, Member: elemkey.ListPosition(pos), Value: json.RawMessage(value)}
	}
	for _, tc := range []struct {
		name    string
		cur     keystate.State
		end     ElementRow
		req     fixture
		code    string                   // error code, or "" when accepted
		meta    *contract.CollectionMeta // after; nil: nothing appended
		element *contract.Element
	}{
		{"OKLPushCreates", keystate.State{}, ElementRow{}, fixture{Op: contract.OpLPush, Value: v}, "", meta(-1, 1, 1), el("add", -1, `"x"`)},
		{"OKRPushCreates", keystate.State{}, ElementRow{}, fixture{Op: contract.OpRPush, Value: v}, "", meta(0, 1, 1), el("add", 0, `"x"`)},
		{"OKLPushWritesHeadMinusOne", list(5, 10, 3, 1), ElementRow{}, fixture{Op: contract.OpLPush, Value: v}, "", meta(9, 4, 1), el("add", 9, `"x"`)},
		{"OKRPushWritesTailPlusOne", list(5, 10, 3, 1), ElementRow{}, fixture{Op: contract.OpRPush, Value: v}, "", meta(10, 4, 1), el("add", 13, `"x"`)},
		{"OKPushAfterDeleteStartsAfresh", deleted, ElementRow{}, fixture{Op: contract.OpRPush, Value: v}, "", meta(0, 1, 10), el("add", 0, `"x"`)},
		{"OKLPopRemovesHead", list(5, 10, 3, 1), head, fixture{Op: contract.OpLPop}, "", meta(11, 2, 1), el("remove", 10, `"h"`)},
		{"OKRPopRemovesTail", list(5, 10, 3, 1), head, fixture{Op: contract.OpRPop}, "", meta(10, 2, 1), el("remove", 12, `"h"`)},
		{"OKPopLastLeavesEmptyList", list(5, -3, 1, 1), head, fixture{Op: contract.OpLPop}, "", meta(-2, 0, 1), el("remove", -3, `"h"`)},
		{"ErrPopEmpty", list(5, 10, 0, 1), ElementRow{}, fixture{Op: contract.OpLPop}, contract.ENotFound, nil, nil},
		{"ErrPopMissing", keystate.State{}, ElementRow{}, fixture{Op: contract.OpRPop}, contract.ENotFound, nil, nil},
		{"ErrPopRowOfEarlierList", list(12, 0, 1, 10), head, fixture{Op: contract.OpLPop}, contract.EInternal, nil, nil},
		{"OKTrimKeepsFirst", list(5, 10, 5, 1), ElementRow{}, fixture{Op: contract.OpLTrim, Start: 0, Stop: 1}, "", meta(10, 2, 1), nil},
		{"OKTrimKeepsLast", list(5, 10, 5, 1), ElementRow{}, fixture{Op: contract.OpLTrim, Start: -2, Stop: -1}, "", meta(13, 2, 1), nil},
		{"OKTrimKeepsNone", list(5, 10, 5, 1), ElementRow{}, fixture{Op: contract.OpLTrim, Start: 3, Stop: 1}, "", meta(15, 0, 1), nil},
		{"OKTrimKeepsAllChangesNothing", list(5, 10, 5, 1), ElementRow{}, fixture{Op: contract.OpLTrim, Start: 0, Stop: 999}, "", nil, nil},
		{"OKTrimMissingChangesNothing", keystate.State{}, ElementRow{}, fixture{Op: contract.OpLTrim, Start: 0, Stop: 1}, "", nil, nil},
		{"OKTrimEmptyChangesNothing", list(5, 10, 0, 1), ElementRow{}, fixture{Op: contract.OpLTrim, Start: 0, Stop: 1}, "", nil, nil},
		{"OKBlindTrimKeepingAllAppends", list(5, 10, 5, 1), ElementRow{}, fixture{Op: contract.OpLTrim, Start: 0, Stop: 999, Blind: true}, "", meta(10, 5, 1), nil},
		{"OKBlindTrimOfEmptyAppends", list(5, 10, 0, 1), ElementRow{}, fixture{Op: contract.OpLTrim, Start: 0, Stop: 1, Blind: true}, "", meta(10, 0, 1), nil},
		{"OKBlindTrimKeepsFirst", list(5, 10, 5, 1), ElementRow{}, fixture{Op: contract.OpLTrim, Start: 0, Stop: 1, Blind: true}, "", meta(10, 2, 1), nil},
		{"OKBlindTrimMissingChangesNothing", keystate.State{}, ElementRow{}, fixture{Op: contract.OpLTrim, Start: 0, Stop: 1, Blind: true}, "", nil, nil},
		{"ErrExpectedVersion", list(5, 10, 3, 1), ElementRow{}, fixture{Op: contract.OpRPush, Value: v, ExpectedVersion: ptr(4)}, contract.EConflict, nil, nil},
		{"ErrPushNotAList", set, ElementRow{}, fixture{Op: contract.OpLPush, Value: v}, contract.EWrongType, nil, nil},
		{"ErrPopNotAList", set, ElementRow{}, fixture{Op: contract.OpLPop}, contract.EWrongType, nil, nil},
		{"ErrTrimNotAList", set, ElementRow{}, fixture{Op: contract.OpLTrim, Stop: 1}, contract.EWrongType, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Principal = key, "p"
			d := decideList(listOf(&r), Input{State: tc.cur, Element: tc.end}, testEnv(now, 1))
			if tc.code != "" {
				if contract.ErrorCode(d.Err) != tc.code || d.Event != nil {
					t.Fatalf("error %v event %v, want %s and nothing appended", d.Err, d.Event, tc.code)
				}
				return
			}
			if d.Err != nil {
				t.Fatal(d.Err)
			}
			if (d.Event != nil) != (tc.meta != nil) || d.Result.Changed != (tc.meta != nil) {
				t.Fatalf("event %+v changed %v, want appended %v", d.Event, d.Result.Changed, tc.meta != nil)
			}
			if tc.meta == nil {
				return
			}
			ev := d.Event
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
			if a := ListAnswer(d.Result); a.Length != tc.meta.Size || a.Version != ev.Version || (tc.element != nil && string(a.Value) != string(tc.element.Value)) {
				t.Fatalf("answer %+v", a)
			}
		})
	}

	t.Run("OKPopRefNamesTheEnd", func(t *testing.T) {
		for op, pos := range map[contract.Op]int64{contract.OpLPop: 10, contract.OpRPop: 12} {
			ref, ok := popRef(list(5, 10, 3, 1), &List{Header: Header{Key: key, Op: op}}, now)
			if !ok || ref.Member != elemkey.ListPosition(pos) || ref.Collection != key.String() {
				t.Errorf("%s: popRef = %+v %v, want position %d", op, ref, ok, pos)
			}
		}
		if _, ok := popRef(list(5, 10, 0, 1), &List{Header: Header{Key: key, Op: contract.OpLPop}}, now); ok {
			t.Error("popRef of an empty list names an element")
		}
		if _, ok := popRef(list(5, 10, 3, 1), &List{Header: Header{Key: key, Op: contract.OpRPush}}, now); ok {
			t.Error("popRef of a push names an element")
		}
	})
	t.Run("OKTrimDigestNamesItsRange", func(t *testing.T) {
		a := fixture{Key: key, Op: contract.OpLTrim, Start: 0, Stop: 9}
		b := a
		b.Stop = 99
		if a.Digest() == b.Digest() {
			t.Error("two trims of different ranges have one digest")
		}
	})
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
	pop := &fixture{Key: key, Op: contract.OpLPop, RequestID: "R", Principal: "p"}
	push := &fixture{Key: key, Op: contract.OpRPush, Value: json.RawMessage(`"x"`), RequestID: "P", Principal: "p"}
	after := func(r *fixture, v int64) keystate.State {
		return keystate.State{Version: v, Live: true, RequestDigest: r.Digest(), Entry: contract.Entry{Key: key.String(), Version: v,
			Value: json.RawMessage(`{"type":"list","size":2,"since":1,"head":1}`), RequestID: r.RequestID, Semantics: contract.Semantics{Purpose: "list"}}}
	}
	ref := RequestRef{Key: key.String(), RequestID: "R"}
	popped := &contract.Element{Op: contract.ElementRemove, Member: elemkey.ListPosition(1), Value: json.RawMessage(`{"job":7}`)}
	for _, tc := range []struct {
		name  string
		cur   keystate.State
		known Memory
		r     *fixture
		value string // answered; "" none
		code  string
	}{
		{"OKReplayAnswersThePoppedValue", after(pop, 5), Memory{ref: {Version: 5, Digest: pop.Digest(), Popped: popped}}, pop, `{"job":7}`, ""},
		{"OKReplayWithoutKnownValueAnswersNone", after(pop, 5), Memory{}, pop, "", ""},
		{"OKReplayIgnoresTheValueOfAnotherVersion", after(pop, 5), Memory{ref: {Version: 4, Digest: pop.Digest(), Popped: popped}}, pop, "", ""},
		{"OKReplayedPushAnswersNoElement", after(push, 5), Memory{}, push, "", ""},
		{"OKOlderPopAnswersThePoppedValue", after(push, 6), Memory{ref: {Version: 5, Digest: pop.Digest(), Popped: popped, After: after(pop, 5).Entry.Value}}, pop, `{"job":7}`, ""},
		{"ErrOlderPopWithoutValueIsStale", after(push, 6), Memory{ref: {Version: 5, Digest: pop.Digest()}}, pop, "", contract.EConflict},
		{"ErrOlderPushIsStale", after(pop, 6), Memory{RequestRef{Key: key.String(), RequestID: "P"}: {Version: 5, Digest: push.Digest()}}, push, "", contract.EConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideList(listOf(tc.r), Input{State: tc.cur, Known: tc.known}, testEnv(now, 1))
			if tc.code != "" {
				if contract.ErrorCode(d.Err) != tc.code || d.Event != nil {
					t.Fatalf("error %v event %v, want %s and nothing appended", d.Err, d.Event, tc.code)
				}
				return
			}
			if d.Err != nil || d.Event != nil || !d.Result.Replayed || !d.Result.Changed {
				t.Fatalf("Decision %+v, want a replay appending nothing", d)
			}
			a := ListAnswer(d.Result)
			if string(a.Value) != tc.value || a.Length != 2 || a.Version != 5 {
				t.Fatalf("answer %+v (value %s), want value %q length 2 version 5", a, a.Value, tc.value)
			}
		})
	}
}
