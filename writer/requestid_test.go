package writer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/schemas"
	"github.com/eskv/eskv/testenv"
)

// testWindow is the default window in versions, without an age: the
// tests of decisions that do not depend on time.
var testWindow = RequestWindow{Versions: DefaultRequestIDWindow}

// TestDecideRequestIDWindow: the rules of a requestId the key's latest
// write does not carry, given what is known of its earlier use.
func TestDecideRequestIDWindow(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/cursor")
	sync1 := Request{Key: key, Op: contract.OpPut, Value: json.RawMessage(`{"cursor":1}`), RequestID: "sync-1", Principal: "p"}
	at := func(v int64) projection.AppliedRequest {
		return projection.AppliedRequest{Version: v, Digest: sync1.Digest()}
	}
	// The key after cursor=1 (sync-1, version 1) and cursor=2 (sync-2).
	cur := func(v int64, latestID string) contract.State {
		return contract.State{Version: v, Live: true, RequestDigest: "d", Entry: contract.Entry{Key: key.String(), Version: v,
			Value: json.RawMessage(`{"cursor":2}`), RequestID: latestID, Semantics: contract.Semantics{Purpose: "cursor"}}}
	}
	deleted := contract.State{Version: 3, Entry: contract.Entry{Key: key.String(), Version: 3, RequestID: "del-1"}}
	withValue := func(r Request, v string) Request { r.Value = json.RawMessage(v); return r }
	withPrincipal := func(r Request, p string) Request { r.Principal = p; return r }
	inc := Request{Key: key, Op: contract.OpIncrement, By: 1, RequestID: "inc-1", Principal: "p"}
	lock := Request{Key: key, Op: contract.OpLockAcquire, Holder: "h", TTLSeconds: 30, RequestID: "acq-1", Principal: "p"}

	for _, tc := range []struct {
		name   string
		cur    contract.State
		req    Request
		prior  projection.AppliedRequest
		known  bool
		window int64
		reason string // the conflict's reason; "" when the rule does not apply
	}{
		{"StaleRetry", cur(2, "sync-2"), sync1, at(1), true, 1000, "stale_request"},
		{"StaleRetryOfDeletedKey", deleted, sync1, at(1), true, 1000, "stale_request"},
		{"StaleAtWindowEdge", cur(1000, "sync-2"), sync1, at(1), true, 1000, "stale_request"},
		{"ReusedWithOtherBody", cur(2, "sync-2"), withValue(sync1, `{"cursor":9}`), at(1), true, 1000, "request_id_reused"},
		{"ReusedByOtherPrincipal", cur(2, "sync-2"), withPrincipal(sync1, "q"), at(1), true, 1000, "request_id_reused"},
		{"StaleIncrement", cur(5, "inc-2"), inc, projection.AppliedRequest{Version: 4, Digest: inc.Digest()}, true, 1000, "stale_request"},
		{"StaleLockAcquire", cur(5, "rel-1"), lock, projection.AppliedRequest{Version: 3, Digest: lock.Digest()}, true, 1000, "stale_request"},
		{"ForgottenPastWindow", cur(1001, "sync-2"), sync1, at(1), true, 1000, ""},
		{"WindowOfOneIsLatestOnly", cur(2, "sync-2"), sync1, at(1), true, 1, ""},
		{"UnknownRequestID", cur(2, "sync-2"), sync1, projection.AppliedRequest{}, false, 1000, ""},
		{"LatestLeftToDecide", cur(2, "sync-1"), sync1, at(2), true, 1000, ""},
		{"NoRequestID", cur(2, "sync-2"), withValue(Request{Key: key, Op: contract.OpPut, Principal: "p"}, `1`), at(1), true, 1000, ""},
		{"DeniedIsOnlyAudited", cur(2, "sync-2"), func() Request { r := sync1; r.Denied = true; return r }(), at(1), true, 1000, ""},
		{"HistoryAheadOfStateIgnored", cur(2, "sync-2"), sync1, at(3), true, 1000, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			d, ok := decideRequestID(tc.cur, tc.prior, tc.known, &r, now, RequestWindow{Versions: tc.window})
			if tc.reason == "" {
				if ok {
					t.Fatalf("the rule applied: %+v", d)
				}
				return
			}
			if !ok || d.event != nil || d.conflict == nil || d.conflict.Reason != tc.reason {
				t.Fatalf("want a %s conflict and no event, got ok %v %+v", tc.reason, ok, d)
			}
			var e *contract.Error
			if !errors.As(d.err, &e) || e.Code != contract.EConflict || e.Field != "requestId" || e.CorrelationID != d.conflict.ID {
				t.Fatalf("answer %v, want version_conflict on requestId tied to the record", d.err)
			}
			var current int64
			if tc.cur.Live {
				current = tc.cur.Version
			}
			if d.conflict.CurrentVersion != current || d.conflict.RequestID != r.RequestID {
				t.Fatalf("record %+v", d.conflict)
			}
			if tc.reason == "stale_request" && !strings.Contains(e.Message, "applied at version") {
				t.Fatalf("message %q does not name the version it was applied at", e.Message)
			}
			b, err := json.Marshal(d.conflict)
			if err != nil {
				t.Fatal(err)
			}
			if err := schemas.ValidateConflict(b); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
		})
	}
}

// TestDecideRequestIDOlderPop: a pop retried after the list or queue was
// written again is, within the window, a replay answering the element it
// popped and the version and metadata after it, appending nothing;
// without a known element, another body or past the window the usual
// rules hold. Every other op stays stale.
func TestDecideRequestIDOlderPop(t *testing.T) {
	now := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	list := mustKey(t, "tenant/a/project/b/jobs")
	queue := mustKey(t, "tenant/a/project/b/tasks")
	lpop := Request{Key: list, Op: contract.OpLPop, RequestID: "pop-1", Principal: "p"}
	rpop := Request{Key: list, Op: contract.OpRPop, RequestID: "pop-1", Principal: "p"}
	qpop := Request{Key: queue, Op: contract.OpQPop, Visibility: 30, RequestID: "pop-1", Principal: "p"}
	push := Request{Key: list, Op: contract.OpRPush, Value: json.RawMessage(`"x"`), RequestID: "pop-1", Principal: "p"}
	listAfter := json.RawMessage(`{"type":"list","size":3,"since":1,"head":2}`)
	deadline := now.Add(10 * time.Second)
	item := &contract.Element{Op: contract.ElementAdd, Member: projection.QueueMember(1, 0, 2), Value: json.RawMessage(`{"job":7}`),
		State: contract.ItemInFlight, Deliveries: 2, VisibleAt: &deadline}
	value := &contract.Element{Op: contract.ElementRemove, Member: projection.ListPosition(1), Value: json.RawMessage(`{"job":1}`)}
	// The collection at version 9, written by someone else since the pop.
	cur := func(k contract.Key, purpose string) contract.State {
		return contract.State{Version: 9, Live: true, RequestDigest: "d", Entry: contract.Entry{Key: k.String(), Version: 9,
			Value: json.RawMessage(`{"type":"` + purpose + `","size":0,"since":1}`), RequestID: "other", Semantics: contract.Semantics{Purpose: purpose}}}
	}
	popAt := func(r Request, v int64, el *contract.Element, after json.RawMessage) projection.AppliedRequest {
		return projection.AppliedRequest{Version: v, Digest: r.Digest(), Popped: el, After: after}
	}
	for _, tc := range []struct {
		name   string
		cur    contract.State
		req    Request
		prior  projection.AppliedRequest
		window int64
		want   string // "replay", a conflict reason, or "" (rule does not apply)
	}{
		{"LPopReplayed", cur(list, "list"), lpop, popAt(lpop, 5, value, listAfter), 1000, "replay"},
		{"RPopReplayed", cur(list, "list"), rpop, popAt(rpop, 5, value, listAfter), 1000, "replay"},
		{"QPopReplayed", cur(queue, "queue"), qpop, popAt(qpop, 5, item, json.RawMessage(`{"type":"queue","size":4,"since":1,"inFlight":1}`)), 1000, "replay"},
		{"PopAtWindowEdgeReplayed", cur(list, "list"), lpop, popAt(lpop, 5, value, listAfter), 5, "replay"},
		{"PopPastWindowForgotten", cur(list, "list"), lpop, popAt(lpop, 4, value, listAfter), 5, ""},
		{"PopWithoutElementStale", cur(list, "list"), lpop, popAt(lpop, 5, nil, nil), 1000, "stale_request"},
		{"PopWithOtherBodyReused", cur(list, "list"), lpop, popAt(rpop, 5, value, listAfter), 1000, "request_id_reused"},
		{"OlderPushStale", cur(list, "list"), push, popAt(push, 5, nil, nil), 1000, "stale_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			d, ok := decideRequestID(tc.cur, tc.prior, true, &r, now, RequestWindow{Versions: tc.window})
			switch {
			case tc.want == "":
				if ok {
					t.Fatalf("the rule applied: %+v", d)
				}
			case tc.want == "replay":
				el := d.result.Element
				if !ok || d.err != nil || d.event != nil || d.conflict != nil || !d.result.Replayed || el == nil ||
					!equalElement(*el, *tc.prior.Popped) || el == tc.prior.Popped {
					t.Fatalf("want a replay of the popped element (a copy), got ok %v %+v", ok, d)
				}
				e := d.result.Entry
				if e.Key != r.Key.String() || e.Version != tc.prior.Version || string(e.Value) != string(tc.prior.After) {
					t.Fatalf("entry %+v, want version %d and the metadata after the pop", e, tc.prior.Version)
				}
			default:
				if !ok || d.event != nil || d.conflict == nil || d.conflict.Reason != tc.want || d.result.Replayed {
					t.Fatalf("want a %s conflict, got ok %v %+v", tc.want, ok, d)
				}
			}
		})
	}
}

// equalElement compares two elements by their JSON.
func equalElement(a, b contract.Element) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestRecentRequests: an overlay entry remembers the requestIds of its
// key's unprojected events, the newest use first, only within the
// window; events without a requestId move the window on.
func TestRecentRequests(t *testing.T) {
	ev := func(v int64, id string) *contract.Event {
		return &contract.Event{Key: "tenant/a/project/b/k", Version: v, PrevVersion: v - 1, Kind: contract.KindPut, RequestID: id, RequestDigest: "d" + id}
	}
	var o overlayEntry
	for _, e := range []*contract.Event{ev(1, "a"), ev(2, "b"), ev(3, "a"), ev(4, ""), ev(5, "c")} {
		o = o.next(e, 10+e.Version, RequestWindow{Versions: 3})
	}
	if o.state.Version != 5 || o.offset != 15 || o.gap.version != 0 {
		t.Fatalf("entry %+v, want the state and offset of version 5, remembering since version 1", o)
	}
	for _, tc := range []struct {
		id      string
		version int64 // 0: forgotten
	}{{"a", 3}, {"b", 0}, {"c", 5}, {"x", 0}} {
		got, ok := o.requests.find(tc.id)
		if ok != (tc.version > 0) || got.Version != tc.version || (ok && got.Digest != "d"+tc.id) {
			t.Errorf("find(%s) = %+v, %v; want version %d", tc.id, got, ok, tc.version)
		}
	}
	if len(o.requests) != 2 {
		t.Errorf("memory %+v holds versions out of the window", o.requests)
	}
}

// TestRequestWindowAge: a requestId is remembered while its write is
// among the key's last Versions versions or younger than Age: on a hot
// key, 5,000 versions later within the age, a retry is still stale and
// writes nothing; past both it is decided as new.
func TestRequestWindowAge(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/counter")
	inc := Request{Key: key, Op: contract.OpIncrement, By: 1, RequestID: "inc-1", Principal: "p"}
	cur := contract.State{Version: 5001, Live: true, RequestDigest: "d", Entry: contract.Entry{Key: key.String(), Version: 5001,
		Value: json.RawMessage(`5001`), RequestID: "inc-5001", Semantics: contract.Semantics{Purpose: "counter"}}}
	window := RequestWindow{Versions: 1000, Age: 2 * time.Minute}
	for _, tc := range []struct {
		name   string
		at     time.Time
		window RequestWindow
		stale  bool
	}{
		{"StaleWithinAge", now.Add(-time.Minute), window, true},
		{"StaleJustWithinAge", now.Add(-2*time.Minute + time.Millisecond), window, true},
		{"ForgottenPastAge", now.Add(-2 * time.Minute), window, false},
		{"UnknownTimeCountsVersionsOnly", time.Time{}, window, false},
		{"NoAgeCountsVersionsOnly", now.Add(-time.Second), RequestWindow{Versions: 1000}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := inc
			prior := projection.AppliedRequest{Version: 1, Digest: inc.Digest(), At: tc.at}
			d, ok := decideRequestID(cur, prior, true, &r, now, tc.window)
			if ok != tc.stale || (ok && (d.event != nil || d.conflict == nil || d.conflict.Reason != "stale_request")) {
				t.Fatalf("decided %v %+v; want stale %v", ok, d, tc.stale)
			}
		})
	}

	// The overlay keeps the uses within the age, beyond the versions.
	var o overlayEntry
	for v := int64(1); v <= 10; v++ {
		e := &contract.Event{Key: key.String(), Version: v, Kind: contract.KindPut, RequestID: fmt.Sprint("r", v), RequestDigest: "d",
			TS: now.Add(time.Duration(v) * 30 * time.Second)}
		o = o.next(e, v, RequestWindow{Versions: 3, Age: 2 * time.Minute})
	}
	// Version 10 is at 5 min: the window keeps 8, 9 and 10 by version,
	// and 7 (at 3:30, younger than 2 min at 5:00) by age.
	if len(o.requests) != 4 || o.requests[0].id != "r7" {
		t.Fatalf("memory %+v; want r7 to r10", o.requests)
	}
}

// TestOverlayForgetsProjectedRequests: trim drops the uses the
// projection holds from an entry it keeps (a key written without
// pause); the entry then asks kv_history until what it forgot is out of
// the window, in versions and age.
func TestOverlayForgetsProjectedRequests(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := "tenant/a/project/b/hot"
	window := RequestWindow{Versions: 3, Age: time.Minute}
	var o overlayEntry
	for v := int64(1); v <= 4; v++ {
		o = o.next(&contract.Event{Key: key, Version: v, Kind: contract.KindPut, RequestID: fmt.Sprint("r", v), RequestDigest: "d", TS: now}, 100+v, window)
	}
	if !o.complete(window, now) {
		t.Fatal("an entry created in the overlay remembers everything")
	}
	o, n := o.forget(103) // versions 1 and 2 projected
	if n != 2 || len(o.requests) != 2 || o.requests[0].id != "r3" || o.gap.version != 2 {
		t.Fatalf("forgot %d: %+v", n, o)
	}
	ref := projection.RequestRef{Key: key, RequestID: "r1"}
	if !recall(ref, o, true, make(requestMemory), window, now) {
		t.Fatal("a forgotten use within the window: want kv_history asked")
	}
	for v := int64(5); v <= 6; v++ { // version 2 leaves the window in versions, not in age
		o = o.next(&contract.Event{Key: key, Version: v, Kind: contract.KindPut, TS: now}, 100+v, window)
	}
	if o.complete(window, now) || !o.complete(window, now.Add(time.Minute)) {
		t.Fatal("want complete once what the entry forgot is out of both windows")
	}
}

// TestRecall: what a batch asks kv_history, given the overlay. The key's
// latest write and ids the overlay remembers are never asked, nor any
// id when the overlay remembers every version of the window; a key the
// overlay does not hold is always asked (its latest write is read in the
// same round trip).
func TestRecall(t *testing.T) {
	key := mustKey(t, "tenant/a/project/b/k")
	put := func(id string) *Request {
		return &Request{Key: key, Op: contract.OpPut, Value: json.RawMessage(`1`), RequestID: id, Principal: "p"}
	}
	// entry is the overlay entry after events of ids from version first.
	entry := func(first int64, ids ...string) overlayEntry {
		var e overlayEntry
		for i, id := range ids {
			e = e.next(&contract.Event{Key: key.String(), Version: first + int64(i), Kind: contract.KindPut, RequestID: id, RequestDigest: "d"}, int64(i), RequestWindow{Versions: 1000})
		}
		return e
	}
	since5 := entry(5, "a", "b") // versions 1-4 are projected
	created := entry(1, "a", "b")
	for _, tc := range []struct {
		name        string
		req         *Request
		entry       overlayEntry
		in          bool
		window      int64
		ask, remind bool
	}{
		{"LatestNotAsked", put("b"), since5, true, 1000, false, false},
		{"OverlayRemembers", put("a"), since5, true, 1000, false, true},
		{"OlderThanOverlayAsked", put("z"), since5, true, 1000, true, false},
		{"CreatedInOverlayNotAsked", put("z"), created, true, 1000, false, false},
		{"OverlayCoversWindowNotAsked", put("z"), since5, true, 2, false, false},
		{"NotInOverlayAsked", put("b"), overlayEntry{}, false, 1000, true, false},
		{"NoRequestIDNotAsked", put(""), overlayEntry{}, false, 1000, false, false},
		{"DeniedNotAsked", func() *Request { r := put("a"); r.Denied = true; return r }(), since5, false, 1000, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			known := make(requestMemory)
			ref, ok := requestRef(tc.req)
			ask := ok && recall(ref, tc.entry, tc.in, known, RequestWindow{Versions: tc.window}, time.Time{})
			if ask != tc.ask {
				t.Fatalf("ask %v, want %v", ask, tc.ask)
			}
			if _, ok := known.get(tc.req); ok != tc.remind {
				t.Fatalf("known %+v, want remembered %v", known, tc.remind)
			}
		})
	}
}

// TestDecideAllSeesBatchRequestIDs: the stale sequence inside one batch
// (nothing projected, nothing in the overlay): put cursor=1 sync-1, put
// cursor=2 sync-2, retry sync-1 -> stale, retry sync-2 -> replayed, and
// an increment retried after another increment adds once.
func TestDecideAllSeesBatchRequestIDs(t *testing.T) {
	w := offlineWriter(t, Config{})
	p := newPartition(w, 0)
	key := mustKey(t, "tenant/a/project/b/cursor")
	counter := mustKey(t, "tenant/a/project/b/counter")
	put := func(v, id string) *Request {
		return &Request{Key: key, Op: contract.OpPut, Value: json.RawMessage(v), RequestID: id, Principal: "p"}
	}
	inc := func(id string) *Request {
		return &Request{Key: counter, Op: contract.OpIncrement, By: 1, Create: true, RequestID: id, Principal: "p"}
	}
	reqs := []*Request{put(`1`, "sync-1"), put(`2`, "sync-2"), put(`1`, "sync-1"), put(`2`, "sync-2"),
		inc("inc-1"), inc("inc-2"), inc("inc-1")}
	batch := make([]*call, len(reqs))
	for i, r := range reqs {
		batch[i] = &call{req: r, done: make(chan answer, 1)}
	}
	states := map[string]contract.State{key.String(): {}, counter.String(): {}}
	ds, recs, evIdx, _ := p.decideAll(context.Background(), batch, states, make(requestMemory), newElemsKnown(), 1)
	if len(evIdx) != 4 || len(recs) != 6 {
		t.Fatalf("%d events and %d records, want 4 events and 2 conflict records", len(evIdx), len(recs))
	}
	if d := ds[2]; d.conflict == nil || d.conflict.Reason != "stale_request" || d.conflict.CurrentVersion != 2 {
		t.Fatalf("retry of sync-1: %+v, want a stale_request conflict at version 2", d)
	}
	if d := ds[3]; !d.result.Replayed || d.result.Entry.Version != 2 {
		t.Fatalf("retry of sync-2: %+v, want replayed at version 2", d)
	}
	if d := ds[6]; d.conflict == nil || d.conflict.Reason != "stale_request" {
		t.Fatalf("retry of inc-1: %+v, want stale_request", d)
	}
	if v := states[key.String()].Entry.Value; string(v) != `2` {
		t.Fatalf("cursor %s, want 2", v)
	}
	if v := states[counter.String()].Entry.Value; string(v) != `2` {
		t.Fatalf("counter %s, want 2 (the retried increment added again)", v)
	}
}

// TestRequestIDsFollowThePartition: the partition moves to another writer
// with nothing projected (no projector runs): the new owner rebuilds the
// overlay from the log and refuses the retries of older writes as the
// first owner would have, and replays the latest.
func TestRequestIDsFollowThePartition(t *testing.T) {
	broker := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	a, runA := startWriter(t, broker, store, Config{InstanceID: "a"})
	testenv.WaitFor(t, 30*time.Second, "writer a ready", a.Ready)

	ctx := t.Context()
	cursor, counter := mustKey(t, "tenant/a/project/b/cursor"), mustKey(t, "tenant/a/project/b/counter")
	put := func(v, id string) *Request {
		return &Request{Key: cursor, Op: contract.OpPut, Value: json.RawMessage(v), RequestID: id, Principal: "p"}
	}
	inc := func(id string) *Request {
		return &Request{Key: counter, Op: contract.OpIncrement, By: 1, Create: true, RequestID: id, Principal: "p"}
	}
	for _, r := range []*Request{put(`1`, "sync-1"), put(`2`, "sync-2"), inc("inc-1"), inc("inc-2")} {
		if _, err := a.Do(ctx, r); err != nil {
			t.Fatalf("%s %s: %v", r.Op, r.RequestID, err)
		}
	}
	if err := runA.Stop(t); err != nil {
		t.Fatalf("writer a: %v", err)
	}

	b := runWriter(t, broker, store, Config{InstanceID: "b"})
	testenv.WaitFor(t, 30*time.Second, "writer b ready", b.Ready)
	for _, r := range []*Request{put(`1`, "sync-1"), inc("inc-1")} {
		_, err := b.Do(ctx, r)
		var e *contract.Error
		if !errors.As(err, &e) || e.Code != contract.EConflict || e.Field != "requestId" || !strings.Contains(e.Message, "already applied at version") {
			t.Fatalf("retry of %s on the new owner: %v, want a stale version_conflict", r.RequestID, err)
		}
	}
	if res, err := b.Do(ctx, put(`2`, "sync-2")); err != nil || !res.Replayed || res.Entry.Version != 2 {
		t.Fatalf("replay of sync-2 on the new owner: %+v, %v", res, err)
	}
	for key, want := range map[contract.Key]string{cursor: `2`, counter: `2`} {
		st, err := b.State(ctx, key)
		if err != nil || st.Version != 2 || string(st.Entry.Value) != want {
			t.Fatalf("%s on the new owner: %+v, %v; want version 2 value %s", key, st, err, want)
		}
	}
}

// TestRequestIDAgeOnAHotKeyAcrossTakeover (issue P1, finding 11): on a
// hot counter, 1,100 increments follow inc-1 (more than
// ESKV_REQUEST_ID_WINDOW's 1000 versions, in seconds), then the writer
// stops and another takes the partition over; inc-1 retried there,
// within ESKV_REQUEST_ID_AGE, is a stale request (409, nothing written),
// not a second increment — whether the new owner finds inc-1 in
// kv_history (Projected) or in the overlay it rebuilt from the log
// (Unprojected).
func TestRequestIDAgeOnAHotKeyAcrossTakeover(t *testing.T) {
	for _, projected := range []bool{true, false} {
		t.Run(map[bool]string{true: "Projected", false: "Unprojected"}[projected], func(t *testing.T) {
			broker := testenv.MustBroker(t, 1)
			store := projection.New(testenv.MustPostgres(t))
			a, runA := startWriter(t, broker, store, Config{InstanceID: "a"})
			testenv.WaitFor(t, 30*time.Second, "writer a ready", a.Ready)
			ctx := t.Context()
			counter := mustKey(t, "tenant/a/project/b/hot-counter")
			inc := func(id string) *Request {
				return &Request{Key: counter, Op: contract.OpIncrement, By: 1, Create: true, RequestID: id, Principal: "p"}
			}
			if _, err := a.Do(ctx, inc("inc-1")); err != nil {
				t.Fatal(err)
			}
			const more = 1100
			var wg sync.WaitGroup
			errs := make(chan error, more)
			for g := range 16 {
				wg.Go(func() {
					for i := g; i < more; i += 16 {
						_, err := a.Do(ctx, inc(fmt.Sprint("hot-", i)))
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if projected {
				pr, err := projector.New(projector.Config{Brokers: broker.Addrs, Topic: broker.Topics.Changes, Partitions: 1}, store, discard, nil)
				if err != nil {
					t.Fatal(err)
				}
				testenv.RunUntilCleanup(t, "projector", pr.Run)
				lso, err := changelog.LastStableOffset(ctx, a.admCl, broker.Topics.Changes, 0)
				if err != nil {
					t.Fatal(err)
				}
				testenv.WaitProjected(t, 60*time.Second, store, broker.Topics.Changes, map[int32]int64{0: lso})
			}
			if err := runA.Stop(t); err != nil {
				t.Fatalf("writer a: %v", err)
			}

			b := runWriter(t, broker, store, Config{InstanceID: "b"})
			testenv.WaitFor(t, 30*time.Second, "writer b ready", b.Ready)
			_, err := b.Do(ctx, inc("inc-1"))
			st, serr := b.State(ctx, counter)
			if serr != nil {
				t.Fatal(serr)
			}
			t.Logf("retry of inc-1 after %d increments and a takeover: %v; counter at version %d, value %s", more, err, st.Version, st.Entry.Value)
			var e *contract.Error
			if !errors.As(err, &e) || e.Code != contract.EConflict || e.Field != "requestId" || !strings.Contains(e.Message, "already applied at version 1") {
				t.Errorf("retry of inc-1: %v; want a stale version_conflict naming version 1", err)
			}
			if want := fmt.Sprint(more + 1); st.Version != more+1 || string(st.Entry.Value) != want {
				t.Errorf("counter at version %d value %s; want version and value %s (inc-1 applied once)", st.Version, st.Entry.Value, want)
			}
		})
	}
}
