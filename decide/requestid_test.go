package decide

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/elemkey"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/schemas"
)

// testWindow is the default window in versions, without an age: the
// tests of decisions that do not depend on time.
var testWindow = RequestWindow{Versions: DefaultRequestIDWindow}

// TestDecideRequestIDWindow: the rules of a requestId the key's latest
// write does not carry, given what is known of its earlier use.
func TestDecideRequestIDWindow(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/cursor")
	sync1 := fixture{Key: key, Op: contract.OpPut, Value: json.RawMessage(`{"cursor":1}`), RequestID: "sync-1", Principal: "p"}
	at := func(v int64) AppliedRequest {
		return AppliedRequest{Version: v, Digest: sync1.Digest()}
	}
	// The key after cursor=1 (sync-1, version 1) and cursor=2 (sync-2).
	cur := func(v int64, latestID string) keystate.State {
		return keystate.State{Version: v, Live: true, RequestDigest: "d", Entry: contract.Entry{Key: key.String(), Version: v,
			Value: json.RawMessage(`{"cursor":2}`), RequestID: latestID, Semantics: contract.Semantics{Purpose: "cursor"}}}
	}
	deleted := keystate.State{Version: 3, Entry: contract.Entry{Key: key.String(), Version: 3, RequestID: "del-1"}}
	withValue := func(r fixture, v string) fixture { r.Value = json.RawMessage(v); return r }
	withPrincipal := func(r fixture, p string) fixture { r.Principal = p; return r }
	inc := fixture{Key: key, Op: contract.OpIncrement, By: 1, RequestID: "inc-1", Principal: "p"}
	lock := fixture{Key: key, Op: contract.OpLockAcquire, Holder: "h", TTLSeconds: 30, RequestID: "acq-1", Principal: "p"}

	for _, tc := range []struct {
		name   string
		cur    keystate.State
		req    fixture
		prior  AppliedRequest
		known  bool
		window int64
		reason string // the conflict's reason; "" when the rule does not apply
	}{
		{"StaleRetry", cur(2, "sync-2"), sync1, at(1), true, 1000, "stale_request"},
		{"StaleRetryOfDeletedKey", deleted, sync1, at(1), true, 1000, "stale_request"},
		{"StaleAtWindowEdge", cur(1000, "sync-2"), sync1, at(1), true, 1000, "stale_request"},
		{"ReusedWithOtherBody", cur(2, "sync-2"), withValue(sync1, `{"cursor":9}`), at(1), true, 1000, "request_id_reused"},
		{"ReusedByOtherPrincipal", cur(2, "sync-2"), withPrincipal(sync1, "q"), at(1), true, 1000, "request_id_reused"},
		{"StaleIncrement", cur(5, "inc-2"), inc, AppliedRequest{Version: 4, Digest: inc.Digest()}, true, 1000, "stale_request"},
		{"StaleLockAcquire", cur(5, "rel-1"), lock, AppliedRequest{Version: 3, Digest: lock.Digest()}, true, 1000, "stale_request"},
		{"ForgottenPastWindow", cur(1001, "sync-2"), sync1, at(1), true, 1000, ""},
		{"WindowOfOneIsLatestOnly", cur(2, "sync-2"), sync1, at(1), true, 1, ""},
		{"UnknownRequestID", cur(2, "sync-2"), sync1, AppliedRequest{}, false, 1000, ""},
		{"LatestLeftToDecide", cur(2, "sync-1"), sync1, at(2), true, 1000, ""},
		{"NoRequestID", cur(2, "sync-2"), withValue(fixture{Key: key, Op: contract.OpPut, Principal: "p"}, `1`), at(1), true, 1000, ""},
		{"DeniedIsOnlyAudited", cur(2, "sync-2"), func() fixture { r := sync1; r.Denied = true; return r }(), at(1), true, 1000, ""},
		{"HistoryAheadOfStateIgnored", cur(2, "sync-2"), sync1, at(3), true, 1000, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			d, ok := requestIDDecision(tc.cur, tc.prior, tc.known, &r, testEnvW(now, 0, RequestWindow{Versions: tc.window}))
			if tc.reason == "" {
				if ok {
					t.Fatalf("the rule applied: %+v", d)
				}
				return
			}
			if !ok || d.Event != nil || d.Conflict == nil || d.Conflict.Reason != tc.reason {
				t.Fatalf("want a %s conflict and no event, got ok %v %+v", tc.reason, ok, d)
			}
			var e *contract.Error
			if !errors.As(d.Err, &e) || e.Code != contract.EConflict || e.Field != "requestId" || e.CorrelationID != d.Conflict.ID {
				t.Fatalf("answer %v, want version_conflict on requestId tied to the record", d.Err)
			}
			var current int64
			if tc.cur.Live {
				current = tc.cur.Version
			}
			if d.Conflict.CurrentVersion != current || d.Conflict.RequestID != r.RequestID {
				t.Fatalf("record %+v", d.Conflict)
			}
			if tc.reason == "stale_request" && !strings.Contains(e.Message, "applied at version") {
				t.Fatalf("message %q does not name the version it was applied at", e.Message)
			}
			b, err := json.Marshal(d.Conflict)
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
	lpop := fixture{Key: list, Op: contract.OpLPop, RequestID: "pop-1", Principal: "p"}
	rpop := fixture{Key: list, Op: contract.OpRPop, RequestID: "pop-1", Principal: "p"}
	qpop := fixture{Key: queue, Op: contract.OpQPop, Visibility: 30, RequestID: "pop-1", Principal: "p"}
	push := fixture{Key: list, Op: contract.OpRPush, Value: json.RawMessage(`"x"`), RequestID: "pop-1", Principal: "p"}
	listAfter := json.RawMessage(`{"type":"list","size":3,"since":1,"head":2}`)
	deadline := now.Add(10 * time.Second)
	item := &contract.Element{Op: contract.ElementAdd, Member: elemkey.QueueMember(1, 0, 2), Value: json.RawMessage(`{"job":7}`),
		State: ItemInFlight, Deliveries: 2, VisibleAt: &deadline}
	value := &contract.Element{Op: contract.ElementRemove, Member: elemkey.ListPosition(1), Value: json.RawMessage(`{"job":1}`)}
	// The collection at version 9, written by someone else since the pop.
	cur := func(k contract.Key, purpose string) keystate.State {
		return keystate.State{Version: 9, Live: true, RequestDigest: "d", Entry: contract.Entry{Key: k.String(), Version: 9,
			Value: json.RawMessage(`{"type":"` + purpose + `","size":0,"since":1}`), RequestID: "other", Semantics: contract.Semantics{Purpose: purpose}}}
	}
	popAt := func(r fixture, v int64, el *contract.Element, after json.RawMessage) AppliedRequest {
		return AppliedRequest{Version: v, Digest: r.Digest(), Popped: el, After: after}
	}
	for _, tc := range []struct {
		name   string
		cur    keystate.State
		req    fixture
		prior  AppliedRequest
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
			d, ok := requestIDDecision(tc.cur, tc.prior, true, &r, testEnvW(now, 0, RequestWindow{Versions: tc.window}))
			switch {
			case tc.want == "":
				if ok {
					t.Fatalf("the rule applied: %+v", d)
				}
			case tc.want == "replay":
				el := d.Result.Element
				if !ok || d.Err != nil || d.Event != nil || d.Conflict != nil || !d.Result.Replayed || el == nil ||
					!equalElement(*el, *tc.prior.Popped) || el == tc.prior.Popped {
					t.Fatalf("want a replay of the popped element (a copy), got ok %v %+v", ok, d)
				}
				e := d.Result.Entry
				if e.Key != r.Key.String() || e.Version != tc.prior.Version || string(e.Value) != string(tc.prior.After) {
					t.Fatalf("entry %+v, want version %d and the metadata after the pop", e, tc.prior.Version)
				}
			default:
				if !ok || d.Event != nil || d.Conflict == nil || d.Conflict.Reason != tc.want || d.Result.Replayed {
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

// TestRequestWindowAge: a requestId is remembered while its write is
// among the key's last Versions versions or younger than Age: on a hot
// key, 5,000 versions later within the age, a retry is still stale and
// writes nothing; past both it is decided as new.
func TestRequestWindowAge(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/counter")
	inc := fixture{Key: key, Op: contract.OpIncrement, By: 1, RequestID: "inc-1", Principal: "p"}
	cur := keystate.State{Version: 5001, Live: true, RequestDigest: "d", Entry: contract.Entry{Key: key.String(), Version: 5001,
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
			prior := AppliedRequest{Version: 1, Digest: inc.Digest(), At: tc.at}
			d, ok := requestIDDecision(cur, prior, true, &r, testEnvW(now, 0, tc.window))
			if ok != tc.stale || (ok && (d.Event != nil || d.Conflict == nil || d.Conflict.Reason != "stale_request")) {
				t.Fatalf("decided %v %+v; want stale %v", ok, d, tc.stale)
			}
		})
	}

}
