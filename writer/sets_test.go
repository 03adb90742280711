package writer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestDecideSet: sadd and srem against the set's metadata and one
// member's kv_elements version: what they append (the element change and
// the new metadata), and when they append nothing.
func TestDecideSet(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/active-agents")
	later := now.Add(time.Hour)
	set := func(v, size, since int64) contract.State {
		meta, _ := json.Marshal(contract.CollectionMeta{Type: "set", Size: size, Since: since})
		return contract.State{Version: v, Live: true, Entry: contract.Entry{Key: key.String(), Version: v, Value: meta,
			CreatedAt: now.Add(-time.Hour), Semantics: contract.Semantics{Purpose: "set"}}}
	}
	withTTL := set(5, 2, 1)
	withTTL.Entry.ExpiresAt = &later
	expired := set(5, 2, 1)
	past := now.Add(-time.Second)
	expired.Entry.ExpiresAt = &past
	deleted := contract.State{Version: 9, Entry: contract.Entry{Key: key.String(), Version: 9}}
	plain := contract.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: json.RawMessage(`1`),
		Semantics: contract.Semantics{Purpose: "counter"}}}

	for _, tc := range []struct {
		name    string
		cur     contract.State
		elem    int64 // the member's kv_elements version (0: none)
		req     Request
		code    string // error code, or "" when accepted
		changed bool   // an event is appended
		meta    contract.CollectionMeta
		element contract.Element
	}{
		{"OKAddCreatesSet", contract.State{}, 0, Request{Op: contract.OpSAdd, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 1, Since: 1}, contract.Element{Op: "add", Member: "m"}},
		{"OKAddNewMember", set(5, 2, 1), 0, Request{Op: contract.OpSAdd, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 3, Since: 1}, contract.Element{Op: "add", Member: "m"}},
		{"OKAddPresentChangesNothing", set(5, 2, 1), 4, Request{Op: contract.OpSAdd, Member: "m"}, "", false, contract.CollectionMeta{}, contract.Element{}},
		{"OKAddRowOfEarlierSet", set(12, 1, 10), 4, Request{Op: contract.OpSAdd, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 2, Since: 10}, contract.Element{Op: "add", Member: "m"}},
		{"OKAddAfterDeleteStartsAfresh", deleted, 4, Request{Op: contract.OpSAdd, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 1, Since: 10}, contract.Element{Op: "add", Member: "m"}},
		{"OKAddToExpiredStartsAfresh", expired, 4, Request{Op: contract.OpSAdd, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 1, Since: 6}, contract.Element{Op: "add", Member: "m"}},
		{"OKRemovePresent", set(5, 2, 1), 4, Request{Op: contract.OpSRem, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 1, Since: 1}, contract.Element{Op: "remove", Member: "m"}},
		{"OKRemoveLastLeavesEmptySet", set(5, 1, 1), 4, Request{Op: contract.OpSRem, Member: "m"}, "", true, contract.CollectionMeta{Type: "set", Size: 0, Since: 1}, contract.Element{Op: "remove", Member: "m"}},
		{"OKRemoveAbsentChangesNothing", set(5, 2, 1), 0, Request{Op: contract.OpSRem, Member: "m"}, "", false, contract.CollectionMeta{}, contract.Element{}},
		{"OKRemoveFromMissingSet", contract.State{}, 0, Request{Op: contract.OpSRem, Member: "m"}, "", false, contract.CollectionMeta{}, contract.Element{}},
		{"OKRemoveRowOfEarlierSet", set(12, 1, 10), 4, Request{Op: contract.OpSRem, Member: "m"}, "", false, contract.CollectionMeta{}, contract.Element{}},
		{"OKExpectedVersion", set(5, 2, 1), 0, Request{Op: contract.OpSAdd, Member: "m", ExpectedVersion: ptr(5)}, "", true, contract.CollectionMeta{Type: "set", Size: 3, Since: 1}, contract.Element{Op: "add", Member: "m"}},
		{"ErrExpectedVersion", set(5, 2, 1), 0, Request{Op: contract.OpSAdd, Member: "m", ExpectedVersion: ptr(4)}, contract.EConflict, false, contract.CollectionMeta{}, contract.Element{}},
		{"ErrNotASet", plain, 0, Request{Op: contract.OpSAdd, Member: "m"}, contract.EWrongType, false, contract.CollectionMeta{}, contract.Element{}},
		{"ErrRemoveNotASet", plain, 0, Request{Op: contract.OpSRem, Member: "m"}, contract.EWrongType, false, contract.CollectionMeta{}, contract.Element{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Principal = key, "p"
			d := DecideSet(tc.cur, tc.elem, requestMemory{}, &r, now, 1, testWindow)
			if tc.code != "" {
				if contract.ErrorCode(d.err) != tc.code || d.event != nil {
					t.Fatalf("error %v event %v, want %s and nothing appended", d.err, d.event, tc.code)
				}
				return
			}
			if d.err != nil {
				t.Fatal(d.err)
			}
			if d.result.Changed != tc.changed || (d.event != nil) != tc.changed {
				t.Fatalf("changed %v event %v, want changed %v", d.result.Changed, d.event, tc.changed)
			}
			if !tc.changed {
				return
			}
			ev := d.event
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
		r := Request{Key: key, Op: contract.OpSAdd, Member: "m"}
		d := DecideSet(withTTL, 0, requestMemory{}, &r, now, 1, testWindow)
		if d.event == nil || d.event.ExpiresAt == nil || !d.event.ExpiresAt.Equal(later) {
			t.Fatalf("event %+v, want the set's expiry kept", d.event)
		}
	})
	t.Run("OKReplayOfTheLatestRequest", func(t *testing.T) {
		r := Request{Key: key, Op: contract.OpSAdd, Member: "m", RequestID: "r1", Principal: "p"}
		d := DecideSet(set(5, 2, 1), 0, requestMemory{}, &r, now, 1, testWindow)
		st := d.event.State()
		again := DecideSet(st, 6, requestMemory{}, &r, now, 1, testWindow)
		if again.event != nil || !again.result.Replayed || !again.result.Changed {
			t.Fatalf("retry: %+v", again)
		}
		other := Request{Key: key, Op: contract.OpSAdd, Member: "n", RequestID: "r1", Principal: "p"}
		if d := DecideSet(st, 0, requestMemory{}, &other, now, 1, testWindow); contract.ErrorCode(d.err) != contract.EConflict || d.event != nil {
			t.Fatalf("another member under the same requestId: %+v", d)
		}
	})
	t.Run("ErrStaleRetry", func(t *testing.T) {
		r := Request{Key: key, Op: contract.OpSAdd, Member: "m", RequestID: "r1", Principal: "p"}
		known := requestMemory{projection.RequestRef{Key: key.String(), RequestID: "r1"}: {Version: 4, Digest: r.Digest()}}
		d := DecideSet(set(5, 2, 1), 0, known, &r, now, 1, testWindow)
		if contract.ErrorCode(d.err) != contract.EConflict || d.event != nil || d.conflict == nil || d.conflict.Reason != "stale_request" {
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
	set := contract.State{Version: 5, Live: true, Entry: contract.Entry{Key: key.String(), Version: 5, Value: meta,
		CreatedAt: now.Add(-time.Hour), Semantics: contract.Semantics{Purpose: "set"}}}
	for _, tc := range []struct {
		name    string
		cur     contract.State
		elem    int64
		op      contract.Op
		size    int64  // the metadata's after the event; -1: nothing appended
		element string // the element's op; "" none
	}{
		{"OKAddPresentAppendsUnchanged", set, 4, contract.OpSAdd, 2, ""},
		{"OKAddAbsentAdds", set, 0, contract.OpSAdd, 3, contract.ElementAdd},
		{"OKRemoveAbsentAppendsUnchanged", set, 0, contract.OpSRem, 2, ""},
		{"OKRemovePresentRemoves", set, 4, contract.OpSRem, 1, contract.ElementRemove},
		{"OKAddCreatesSet", contract.State{}, 0, contract.OpSAdd, 1, contract.ElementAdd},
		{"OKRemoveFromMissingSetChangesNothing", contract.State{}, 0, contract.OpSRem, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Request{Key: key, Op: tc.op, Member: "m", Principal: "wo", Blind: true}
			d := DecideSet(tc.cur, tc.elem, requestMemory{}, &r, now, 1, testWindow)
			if d.err != nil {
				t.Fatal(d.err)
			}
			if tc.size < 0 {
				if d.event != nil || d.result.Entry.Version != 0 {
					t.Fatalf("event %+v result %+v, want nothing appended", d.event, d.result)
				}
				return
			}
			ev := d.event
			if ev == nil || ev.Version != tc.cur.Version+1 || d.result.Entry.Version != ev.Version || ev.Op != tc.op || ev.Semantics.Purpose != "set" {
				t.Fatalf("event %+v result %+v, want version %d", ev, d.result, tc.cur.Version+1)
			}
			got, err := contract.ParseCollectionMeta(ev.After)
			if err != nil || got.Size != tc.size {
				t.Fatalf("after %s, want size %d", ev.After, tc.size)
			}
			if tc.element == "" && ev.Element != nil || tc.element != "" && (ev.Element == nil || ev.Element.Op != tc.element) {
				t.Fatalf("element %+v, want op %q", ev.Element, tc.element)
			}
			if d.result.Changed != (tc.element != "") {
				t.Fatalf("changed %v", d.result.Changed)
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
	cur := contract.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: meta, Semantics: contract.Semantics{Purpose: "set"}}}
	for _, tc := range []struct {
		name string
		cur  contract.State
		req  Request
		code string
	}{
		{"ErrPutPurposeSet", contract.State{}, Request{Op: contract.OpPut, Value: meta, Semantics: contract.Semantics{Purpose: "set"}}, contract.EInvalid},
		{"ErrPutOverSet", cur, Request{Op: contract.OpPut, Value: json.RawMessage(`1`)}, contract.EWrongType},
		{"ErrCASOverSet", cur, Request{Op: contract.OpPut, Value: json.RawMessage(`1`), ExpectedVersion: ptr(3)}, contract.EWrongType},
		{"ErrIncrementSet", cur, Request{Op: contract.OpIncrement, By: 1}, contract.EWrongType},
		{"ErrPatchSet", cur, Request{Op: contract.OpPatch, Set: map[string]json.RawMessage{"size": json.RawMessage(`9`)}}, contract.EWrongType},
		{"ErrLockOnSet", cur, Request{Op: contract.OpLockAcquire, Holder: "h", TTLSeconds: 5}, contract.EWrongType},
		{"OKDeleteSet", cur, Request{Op: contract.OpDelete}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key = key
			d := Decide(tc.cur, &r, now, 1)
			if contract.ErrorCode(d.err) != tc.code && !(tc.code == "" && d.err == nil) {
				t.Fatalf("error %v, want %q", d.err, tc.code)
			}
			if (d.event != nil) != (tc.code == "") {
				t.Fatalf("event %+v", d.event)
			}
		})
	}
}

// TestElementOverlay: the overlay entry of a set key remembers each
// member's unprojected change, so a batch decides on it without asking
// the projection; it goes with the entry.
func TestElementOverlay(t *testing.T) {
	now := time.Now().UTC()
	key := mustKey(t, "tenant/a/project/b/s")
	var o overlayEntry
	var cur contract.State
	for i, step := range []struct {
		op     contract.Op
		member string
	}{{contract.OpSAdd, "a"}, {contract.OpSAdd, "b"}, {contract.OpSRem, "a"}} {
		r := Request{Key: key, Op: step.op, Member: step.member}
		d := DecideSet(cur, o.elems[step.member], requestMemory{}, &r, now, 1, testWindow)
		if d.event == nil {
			t.Fatalf("step %d appended nothing: %v", i, d.err)
		}
		o = o.next(d.event, int64(i), testWindow)
		cur = o.state
	}
	if o.elems["a"] != 0 || o.elems["b"] != 2 || len(o.elems) != 2 {
		t.Fatalf("elems %v, want a removed and b added at 2", o.elems)
	}
	if a, _ := ReadIsMember(key, cur.Visible(now), o.elems["b"]); !a.IsMember {
		t.Fatal("b is not a member")
	}
	if c, _ := ReadCard(key, cur.Visible(now)); c.Size != 1 {
		t.Fatalf("size %d, want 1", c.Size)
	}
}

// TestSetMembersFollowThePartition: a new owner of the partition knows the
// membership of members whose changes the projection does not hold yet
// (its overlay is rebuilt from the log): nothing is projected here, and
// it decides and answers from what catch-up read.
func TestSetMembersFollowThePartition(t *testing.T) {
	broker := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	a, runA := startWriter(t, broker, store, Config{InstanceID: "a"})
	testenv.WaitFor(t, 30*time.Second, "writer a ready", a.Ready)
	ctx := t.Context()
	set := mustKey(t, "tenant/a/project/b/agents")
	req := func(op contract.Op, m string) *Request { return &Request{Key: set, Op: op, Member: m, Principal: "p"} }
	for _, r := range []*Request{req(contract.OpSAdd, "x"), req(contract.OpSAdd, "y"), req(contract.OpSRem, "x")} {
		if res, err := a.Do(ctx, r); err != nil || !res.Changed {
			t.Fatalf("%s %s: %+v %v", r.Op, r.Member, res, err)
		}
	}
	if err := runA.Stop(t); err != nil {
		t.Fatalf("writer a: %v", err)
	}

	b := runWriter(t, broker, store, Config{InstanceID: "b"})
	testenv.WaitFor(t, 30*time.Second, "writer b ready", b.Ready)
	for _, step := range []struct {
		r       *Request
		changed bool
		version int64
	}{
		{req(contract.OpSAdd, "y"), false, 3}, // still there
		{req(contract.OpSRem, "x"), false, 3}, // already gone
		{req(contract.OpSAdd, "x"), true, 4},
	} {
		res, err := b.Do(ctx, step.r)
		if err != nil || res.Changed != step.changed || res.Entry.Version != step.version {
			t.Fatalf("%s %s on the new owner: %+v %v, want changed %v at version %d", step.r.Op, step.r.Member, res, err, step.changed, step.version)
		}
	}
	for m, want := range map[string]bool{"x": true, "y": true, "z": false} {
		st, elem, err := b.Member(ctx, set, m)
		if err != nil {
			t.Fatal(err)
		}
		if a, err := ReadIsMember(set, st.Visible(time.Now()), elem); err != nil || a.IsMember != want {
			t.Fatalf("sismember %s: %+v %v, want %v", m, a, err, want)
		}
	}
}
