package decide

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// TestDecideSet: sadd and srem against the set's metadata and one
// member's kv_elements version: what they append (the element change and
// the new metadata), and when they append nothing.
func TestDecideSet(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/active-agents")
	later := now.Add(time.Hour)
	set := func(v, size, since int64) keystate.State {
		meta, _ := json.Marshal(contract.CollectionMeta{Type: "set", Size: size, Since: since})
		return keystate.State{Version: v, Live: true, Entry: contract.Entry{Key: key.String(), Version: v, Value: meta,
			CreatedAt: now.Add(-time.Hour), Semantics: contract.Semantics{Purpose: "set"}}}
	}
	withTTL := set(5, 2, 1)
	withTTL.Entry.ExpiresAt = &later
	expired := set(5, 2, 1)
	past := now.Add(-time.Second)
	expired.Entry.ExpiresAt = &past
	deleted := keystate.State{Version: 9, Entry: contract.Entry{Key: key.String(), Version: 9}}
	plain := keystate.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: json.RawMessage(`1`),
		Semantics: contract.Semantics{Purpose: "counter"}}}

	for _, tc := range []struct {
		name    string
		cur     keystate.State
		elem    int64 // the member's kv_elements version (0: none)
		req     fixture
		code    string // error code, or "" when accepted
		changed bool   // an event is appended
		meta    contract.CollectionMeta
		element contract.Element
	}{
		{"OKAddCreatesSet", keystate.State{}, 0, fixture{Op: contract.OpSAdd, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 1, Since: 1}, contract.Element{Op: "add", Member: "m"}},
		{"OKAddNewMember", set(5, 2, 1), 0, fixture{Op: contract.OpSAdd, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 3, Since: 1}, contract.Element{Op: "add", Member: "m"}},
		{"OKAddPresentChangesNothing", set(5, 2, 1), 4, fixture{Op: contract.OpSAdd, Member: "m"}, "", false, contract.CollectionMeta{}, contract.Element{}},
		{"OKAddRowOfEarlierSet", set(12, 1, 10), 4, fixture{Op: contract.OpSAdd, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 2, Since: 10}, contract.Element{Op: "add", Member: "m"}},
		{"OKAddAfterDeleteStartsAfresh", deleted, 4, fixture{Op: contract.OpSAdd, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 1, Since: 10}, contract.Element{Op: "add", Member: "m"}},
		{"OKAddToExpiredStartsAfresh", expired, 4, fixture{Op: contract.OpSAdd, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 1, Since: 6}, contract.Element{Op: "add", Member: "m"}},
		{"OKRemovePresent", set(5, 2, 1), 4, fixture{Op: contract.OpSRem, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 1, Since: 1}, contract.Element{Op: "remove", Member: "m"}},
		{"OKRemoveLastLeavesEmptySet", set(5, 1, 1), 4, fixture{Op: contract.OpSRem, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 0, Since: 1}, contract.Element{Op: "remove", Member: "m"}},
		{"OKRemoveAbsentChangesNothing", set(5, 2, 1), 0, fixture{Op: contract.OpSRem, Member: "m"}, "", false, contract.CollectionMeta{}, contract.Element{}},
		{"OKRemoveFromMissingSet", keystate.State{}, 0, fixture{Op: contract.OpSRem, Member: "m"}, "", false, contract.CollectionMeta{}, contract.Element{}},
		{"OKRemoveRowOfEarlierSet", set(12, 1, 10), 4, fixture{Op: contract.OpSRem, Member: "m"}, "", false, contract.CollectionMeta{}, contract.Element{}},
		{"OKExpectedVersion", set(5, 2, 1), 0, fixture{Op: contract.OpSAdd, Member: "m", ExpectedVersion: ptr(5)}, "", true, contract.CollectionMeta{Type: "set", Size: 3, Since: 1}, contract.Element{Op: "add", Member: "m"}},
		{"ErrExpectedVersion", set(5, 2, 1), 0, fixture{Op: contract.OpSAdd, Member: "m", ExpectedVersion: ptr(4)}, contract.EConflict, false, contract.CollectionMeta{}, contract.Element{}},
		{"ErrNotASet", plain, 0, fixture{Op: contract.OpSAdd, Member: "m"}, contract.EWrongType, false, contract.CollectionMeta{}, contract.Element{}},
		{"ErrRemoveNotASet", plain, 0, fixture{Op: contract.OpSRem, Member: "m"}, contract.EWrongType, false, contract.CollectionMeta{}, contract.Element{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Principal = key, "p"
			d := decideSet(setOf(&r), Input{State: tc.cur, Element: ElementRow{Version: tc.elem}}, testEnv(now, 1))
			if tc.code != "" {
				if contract.ErrorCode(d.Err) != tc.code || d.Event != nil {
					t.Fatalf("error %v event %v, want %s and nothing appended", d.Err, d.Event, tc.code)
				}
				return
			}
			if d.Err != nil {
				t.Fatal(d.Err)
			}
			if d.Result.Changed != tc.changed || (d.Event != nil) != tc.changed {
				t.Fatalf("changed %v event %v, want changed %v", d.Result.Changed, d.Event, tc.changed)
			}
			if !tc.changed {
				return
			}
			ev := d.Event
			meta, err := contract.ParseCollectionMeta(ev.After)
			if err != nil || meta != tc.meta {
				t.Fatalf("metadata %s (%v), want %+v", ev.After, err, tc.meta)
			}
			if ev.Version != tc.cur.Version+1 || ev.Op != r.Op || ev.Kind != contract.KindPut || ev.Semantics.Purpose != "set" || ev.Element.Op != tc.element.Op || ev.Element.Member != tc.element.Member {
				t.Fatalf("event %+v element %+v", ev, ev.Element)
			}
		})
	}

	t.Run("OKAddKeepsTheSetsExpiry", func(t *testing.T) {
		r := fixture{Key: key, Op: contract.OpSAdd, Member: "m"}
		d := decideSet(setOf(&r), Input{State: withTTL}, testEnv(now, 1))
		if d.Event == nil || d.Event.ExpiresAt == nil || !d.Event.ExpiresAt.Equal(later) {
			t.Fatalf("event %+v, want the set's expiry kept", d.Event)
		}
	})
	t.Run("OKReplayOfTheLatestRequest", func(t *testing.T) {
		r := fixture{Key: key, Op: contract.OpSAdd, Member: "m", RequestID: "r1", Principal: "p"}
		d := decideSet(setOf(&r), Input{State: set(5, 2, 1)}, testEnv(now, 1))
		st := keystate.FromEvent(d.Event)
		again := decideSet(setOf(&r), Input{State: st, Element: ElementRow{Version: 6}}, testEnv(now, 1))
		if again.Event != nil || !again.Result.Replayed || !again.Result.Changed {
			t.Fatalf("retry: %+v", again)
		}
		other := fixture{Key: key, Op: contract.OpSAdd, Member: "n", RequestID: "r1", Principal: "p"}
		if d := decideSet(setOf(&other), Input{State: st}, testEnv(now, 1)); contract.ErrorCode(d.Err) != contract.EConflict || d.Event != nil {
			t.Fatalf("another member under the same requestId: %+v", d)
		}
	})
	t.Run("ErrStaleRetry", func(t *testing.T) {
		r := fixture{Key: key, Op: contract.OpSAdd, Member: "m", RequestID: "r1", Principal: "p"}
		known := Memory{RequestRef{Key: key.String(), RequestID: "r1"}: {Version: 4, Digest: r.Digest()}}
		d := decideSet(setOf(&r), Input{State: set(5, 2, 1), Known: known}, testEnv(now, 1))
		if contract.ErrorCode(d.Err) != contract.EConflict || d.Event != nil || d.Conflict == nil || d.Conflict.Reason != "stale_request" {
			t.Fatalf("%+v", d)
		}
	})
}

// TestDecideSetBlind: an sadd or srem by a principal that may not read
// the set (Blind) moves the set's version by exactly one whether the
// member was there or not: one that changes nothing appends an event
// without an element and with the metadata unchanged, so neither its
// answer nor any later version tells membership. An absent set is not
// created by a blind srem.
func TestDecideSetBlind(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/active-agents")
	meta, _ := json.Marshal(contract.CollectionMeta{Type: "set", Size: 2, Since: 1})
	set := keystate.State{Version: 5, Live: true, Entry: contract.Entry{Key: key.String(), Version: 5, Value: meta,
		CreatedAt: now.Add(-time.Hour), Semantics: contract.Semantics{Purpose: "set"}}}
	for _, tc := range []struct {
		name    string
		cur     keystate.State
		elem    int64
		op      contract.Op
		size    int64  // the metadata's after the event; -1: nothing appended
		element string // the element's op; "" none
	}{
		{"OKAddPresentAppendsUnchanged", set, 4, contract.OpSAdd, 2, ""},
		{"OKAddAbsentAdds", set, 0, contract.OpSAdd, 3, contract.ElementAdd},
		{"OKRemoveAbsentAppendsUnchanged", set, 0, contract.OpSRem, 2, ""},
		{"OKRemovePresentRemoves", set, 4, contract.OpSRem, 1, contract.ElementRemove},
		{"OKAddCreatesSet", keystate.State{}, 0, contract.OpSAdd, 1, contract.ElementAdd},
		{"OKRemoveFromMissingSetChangesNothing", keystate.State{}, 0, contract.OpSRem, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fixture{Key: key, Op: tc.op, Member: "m", Principal: "wo", Blind: true}
			d := decideSet(setOf(&r), Input{State: tc.cur, Element: ElementRow{Version: tc.elem}}, testEnv(now, 1))
			if d.Err != nil {
				t.Fatal(d.Err)
			}
			if tc.size < 0 {
				if d.Event != nil || d.Result.Entry.Version != 0 {
					t.Fatalf("event %+v result %+v, want nothing appended", d.Event, d.Result)
				}
				return
			}
			ev := d.Event
			if ev == nil || ev.Version != tc.cur.Version+1 || d.Result.Entry.Version != ev.Version || ev.Op != tc.op || ev.Semantics.Purpose != "set" {
				t.Fatalf("event %+v result %+v, want version %d", ev, d.Result, tc.cur.Version+1)
			}
			got, err := contract.ParseCollectionMeta(ev.After)
			if err != nil || got.Size != tc.size {
				t.Fatalf("after %s, want size %d", ev.After, tc.size)
			}
			if tc.element == "" && ev.Element != nil || tc.element != "" && (ev.Element == nil || ev.Element.Op != tc.element) {
				t.Fatalf("element %+v, want op %q", ev.Element, tc.element)
			}
			if d.Result.Changed != (tc.element != "") {
				t.Fatalf("changed %v", d.Result.Changed)
			}
		})
	}
}

// TestPlainWritesKeepOffSets: a plain write may neither name a set's
// purpose nor change a set (wrong_type); DELETE removes it.
func TestPlainWritesKeepOffSets(t *testing.T) {
	now := time.Now().UTC()
	key := mustKey(t, "tenant/a/project/b/s")
	meta := json.RawMessage(`{"type":"set","size":2,"since":1}`)
	cur := keystate.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: meta, Semantics: contract.Semantics{Purpose: "set"}}}
	for _, tc := range []struct {
		name string
		cur  keystate.State
		req  fixture
		code string
	}{
		{"ErrPutPurposeSet", keystate.State{}, fixture{Op: contract.OpPut, Value: meta, Semantics: contract.Semantics{Purpose: "set"}}, contract.EInvalid},
		{"ErrPutOverSet", cur, fixture{Op: contract.OpPut, Value: json.RawMessage(`1`)}, contract.EWrongType},
		{"ErrCASOverSet", cur, fixture{Op: contract.OpPut, Value: json.RawMessage(`1`), ExpectedVersion: ptr(3)}, contract.EWrongType},
		{"ErrIncrementSet", cur, fixture{Op: contract.OpIncrement, By: 1}, contract.EWrongType},
		{"ErrPatchSet", cur, fixture{Op: contract.OpPatch, Set: map[string]json.RawMessage{"size": json.RawMessage(`9`)}}, contract.EWrongType},
		{"ErrLockOnSet", cur, fixture{Op: contract.OpLockAcquire, Holder: "h", TTLSeconds: 5}, contract.EWrongType},
		{"OKDeleteSet", cur, fixture{Op: contract.OpDelete}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key = key
			d := decideOn(tc.cur, &r, testEnv(now, 1))
			if contract.ErrorCode(d.Err) != tc.code && !(tc.code == "" && d.Err == nil) {
				t.Fatalf("error %v, want %q", d.Err, tc.code)
			}
			if (d.Event != nil) != (tc.code == "") {
				t.Fatalf("event %+v", d.Event)
			}
		})
	}
}
