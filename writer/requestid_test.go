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
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
)

// testWindow is the default window in versions, without an age: the
// tests of decisions that do not depend on time.
var testWindow = decide.RequestWindow{Versions: DefaultRequestIDWindow}

// TestRecentRequests: an overlay entry remembers the requestIds of its
// key's unprojected events, the newest use first, only within the
// window; events without a requestId move the window on.
func TestRecentRequests(t *testing.T) {
	t.Parallel()
	ev := func(v int64, id string) *contract.Event {
		return &contract.Event{Key: "tenant/a/project/b/k", Version: v, PrevVersion: v - 1, Kind: contract.KindPut, RequestID: id, RequestDigest: "d" + id}
	}
	var o overlayEntry
	for _, e := range []*contract.Event{ev(1, "a"), ev(2, "b"), ev(3, "a"), ev(4, ""), ev(5, "c")} {
		o = o.next(e, 10+e.Version, decide.RequestWindow{Versions: 3})
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

// TestOverlayForgetsProjectedRequests: trim drops the uses the
// projection holds from an entry it keeps (a key written without
// pause); the entry then asks kv_history until what it forgot is out of
// the window, in versions and age.
func TestOverlayForgetsProjectedRequests(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := "tenant/a/project/b/hot"
	window := decide.RequestWindow{Versions: 3, Age: time.Minute}
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
	ref := decide.RequestRef{Key: key, RequestID: "r1"}
	if !recall(ref, &o, make(decide.Memory), window, now) {
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
	t.Parallel()
	key := mustKey(t, "tenant/a/project/b/k")
	put := func(id string) *decide.KV {
		return &decide.KV{Header: decide.Header{Key: key, Op: contract.OpPut, RequestID: id, Principal: "p"}, Value: json.RawMessage(`1`)}
	}
	// entry is the overlay entry after events of ids from version first.
	entry := func(first int64, ids ...string) overlayEntry {
		var e overlayEntry
		for i, id := range ids {
			e = e.next(&contract.Event{Key: key.String(), Version: first + int64(i), Kind: contract.KindPut, RequestID: id, RequestDigest: "d"}, int64(i), decide.RequestWindow{Versions: 1000})
		}
		return e
	}
	since5 := entry(5, "a", "b") // versions 1-4 are projected
	created := entry(1, "a", "b")
	for _, tc := range []struct {
		name        string
		req         *decide.KV
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
		{"DeniedNotAsked", func() *decide.KV { r := put("a"); r.Denied = true; return r }(), since5, false, 1000, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			known := make(decide.Memory)
			ref, ok := planRef(tc.req)
			ask := ok && recall(ref, overlayIf(tc.entry, tc.in), known, decide.RequestWindow{Versions: tc.window}, time.Time{})
			if ask != tc.ask {
				t.Fatalf("ask %v, want %v", ask, tc.ask)
			}
			if _, ok := known.Get(tc.req); ok != tc.remind {
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
	t.Parallel()
	w := offlineWriter(t, Config{})
	p := newPartition(w, 0)
	key := mustKey(t, "tenant/a/project/b/cursor")
	counter := mustKey(t, "tenant/a/project/b/counter")
	put := func(v, id string) *decide.KV {
		return &decide.KV{Header: decide.Header{Key: key, Op: contract.OpPut, RequestID: id, Principal: "p"}, Value: json.RawMessage(v)}
	}
	inc := func(id string) *decide.KV {
		return &decide.KV{Header: decide.Header{Key: counter, Op: contract.OpIncrement, RequestID: id, Principal: "p"}, By: 1, Create: true}
	}
	reqs := []*decide.KV{put(`1`, "sync-1"), put(`2`, "sync-2"), put(`1`, "sync-1"), put(`2`, "sync-2"),
		inc("inc-1"), inc("inc-2"), inc("inc-1")}
	batch := make([]*call, len(reqs))
	for i, r := range reqs {
		batch[i] = &call{cmd: r, done: make(chan answer, 1)}
	}
	states := map[string]keystate.State{key.String(): {}, counter.String(): {}}
	ds, recs, evIdx, _ := p.decideAll(context.Background(), batch, &batchReads{states: states, known: make(decide.Memory), elems: newElemsKnown()}, 1)
	if len(evIdx) != 4 || len(recs) != 6 {
		t.Fatalf("%d events and %d records, want 4 events and 2 conflict records", len(evIdx), len(recs))
	}
	if d := ds[2]; d.Conflict == nil || d.Conflict.Reason != "stale_request" || d.Conflict.CurrentVersion != 2 {
		t.Fatalf("retry of sync-1: %+v, want a stale_request conflict at version 2", d)
	}
	if d := ds[3]; !d.Result.Replayed || d.Result.Entry.Version != 2 {
		t.Fatalf("retry of sync-2: %+v, want replayed at version 2", d)
	}
	if d := ds[6]; d.Conflict == nil || d.Conflict.Reason != "stale_request" {
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
	t.Parallel()
	broker := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	a, runA := startWriter(t, broker, store, Config{InstanceID: "a"})
	testenv.WaitFor(t, 30*time.Second, "writer a ready", a.Ready)

	ctx := t.Context()
	cursor, counter := mustKey(t, "tenant/a/project/b/cursor"), mustKey(t, "tenant/a/project/b/counter")
	put := func(v, id string) *decide.KV {
		return &decide.KV{Header: decide.Header{Key: cursor, Op: contract.OpPut, RequestID: id, Principal: "p"}, Value: json.RawMessage(v)}
	}
	inc := func(id string) *decide.KV {
		return &decide.KV{Header: decide.Header{Key: counter, Op: contract.OpIncrement, RequestID: id, Principal: "p"}, By: 1, Create: true}
	}
	for _, r := range []*decide.KV{put(`1`, "sync-1"), put(`2`, "sync-2"), inc("inc-1"), inc("inc-2")} {
		if _, err := a.Do(ctx, r); err != nil {
			t.Fatalf("%s %s: %v", r.Op, r.RequestID, err)
		}
	}
	if err := runA.Stop(t); err != nil {
		t.Fatalf("writer a: %v", err)
	}

	b := runWriter(t, broker, store, Config{InstanceID: "b"})
	testenv.WaitFor(t, 30*time.Second, "writer b ready", b.Ready)
	for _, r := range []*decide.KV{put(`1`, "sync-1"), inc("inc-1")} {
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
	t.Parallel()
	for _, projected := range []bool{true, false} {
		t.Run(map[bool]string{true: "Projected", false: "Unprojected"}[projected], func(t *testing.T) {
			broker := testenv.MustBroker(t, 1)
			store := projection.New(testenv.MustPostgres(t))
			a, runA := startWriter(t, broker, store, Config{InstanceID: "a"})
			testenv.WaitFor(t, 30*time.Second, "writer a ready", a.Ready)
			ctx := t.Context()
			counter := mustKey(t, "tenant/a/project/b/hot-counter")
			inc := func(id string) *decide.KV {
				return &decide.KV{Header: decide.Header{Key: counter, Op: contract.OpIncrement, RequestID: id, Principal: "p"}, By: 1, Create: true}
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

// TestOverlayRequestWindowAge: the overlay keeps the uses within the
// window's age, beyond its versions (decide's TestRequestWindowAge
// covers the rule).
func TestOverlayRequestWindowAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/counter")
	// The overlay keeps the uses within the age, beyond the versions.
	var o overlayEntry
	for v := int64(1); v <= 10; v++ {
		e := &contract.Event{Key: key.String(), Version: v, Kind: contract.KindPut, RequestID: fmt.Sprint("r", v), RequestDigest: "d",
			TS: now.Add(time.Duration(v) * 30 * time.Second)}
		o = o.next(e, v, decide.RequestWindow{Versions: 3, Age: 2 * time.Minute})
	}
	// Version 10 is at 5 min: the window keeps 8, 9 and 10 by version,
	// and 7 (at 3:30, younger than 2 min at 5:00) by age.
	if len(o.requests) != 4 || o.requests[0].id != "r7" {
		t.Fatalf("memory %+v; want r7 to r10", o.requests)
	}
}

// overlayIf is &e when the overlay holds e (in), else nil (recall).
func overlayIf(e overlayEntry, in bool) *overlayEntry {
	if !in {
		return nil
	}
	return &e
}

// planRef is the requestId r's plan recalls, if any.
func planRef(r *decide.KV) (decide.RequestRef, bool) {
	var p decide.Plan
	r.Plan(&p)
	if len(p.Requests) == 0 {
		return decide.RequestRef{}, false
	}
	return p.Requests[0], true
}
