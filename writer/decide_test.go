package writer

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/eskv/eskv/events"
)

func ptr(v int64) *int64 { return &v }

func mustKey(t *testing.T, s string) events.Key {
	t.Helper()
	k, err := events.ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/k")
	created := now.Add(-time.Hour)
	past := now.Add(-time.Second)
	live := func(v int64, val string) events.State {
		return events.State{Version: v, Live: true, Entry: events.Entry{Key: key.String(), Version: v, Value: json.RawMessage(val), CreatedAt: created}}
	}
	expired := live(4, `"old"`)
	expired.Entry.ExpiresAt = &past
	deleted := events.State{Version: 7, Entry: events.Entry{Key: key.String(), Version: 7}}

	for _, tc := range []struct {
		name    string
		cur     events.State
		req     Request
		code    string // error code, or "" when accepted
		version int64  // version of the event
		op      events.Op
		current int64 // currentVersion of a conflict
	}{
		{"OKCreate", events.State{}, Request{Op: events.OpPut, Value: json.RawMessage(`1`), ExpectedVersion: ptr(0)}, "", 1, events.OpCreate, 0},
		{"OKSet", live(3, `1`), Request{Op: events.OpPut, Value: json.RawMessage(`2`)}, "", 4, events.OpSet, 0},
		{"OKCAS", live(3, `1`), Request{Op: events.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(3)}, "", 4, events.OpCAS, 0},
		{"ErrCASStale", live(3, `1`), Request{Op: events.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(2)}, events.EConflict, 0, "", 3},
		{"ErrCreateExisting", live(3, `1`), Request{Op: events.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(0)}, events.EConflict, 0, "", 3},
		{"ErrCASOnAbsent", events.State{}, Request{Op: events.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(1)}, events.EConflict, 0, "", 0},
		{"OKCreateOverExpired", expired, Request{Op: events.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(0)}, "", 5, events.OpCreate, 0},
		{"ErrCASOnExpired", expired, Request{Op: events.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(4)}, events.EConflict, 0, "", 0},
		{"OKRecreateAfterDelete", deleted, Request{Op: events.OpPut, Value: json.RawMessage(`2`), ExpectedVersion: ptr(0)}, "", 8, events.OpCreate, 0},
		{"OKDelete", live(3, `1`), Request{Op: events.OpDelete}, "", 4, events.OpDelete, 0},
		{"OKDeleteCAS", live(3, `1`), Request{Op: events.OpDelete, ExpectedVersion: ptr(3)}, "", 4, events.OpDelete, 0},
		{"ErrDeleteStale", live(3, `1`), Request{Op: events.OpDelete, ExpectedVersion: ptr(1)}, events.EConflict, 0, "", 3},
		{"ErrDeleteAbsent", deleted, Request{Op: events.OpDelete}, events.ENotFound, 0, "", 0},
		{"ErrDeleteExpired", expired, Request{Op: events.OpDelete}, events.ENotFound, 0, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Principal = key, "p"
			d := Decide(tc.cur, &r, now, 9)
			if tc.code != "" {
				if events.ErrorCode(d.err) != tc.code || d.event != nil {
					t.Fatalf("want %s, got event %v err %v", tc.code, d.event, d.err)
				}
				if tc.code == events.EConflict {
					if d.conflict == nil || d.conflict.CurrentVersion != tc.current {
						t.Fatalf("conflict record %+v, want current %d", d.conflict, tc.current)
					}
					var e *events.Error
					errors.As(d.err, &e)
					if e.CorrelationID != d.conflict.ID {
						t.Fatalf("409 and conflict record have different ids")
					}
				}
				return
			}
			e := d.event
			if d.err != nil || e == nil {
				t.Fatalf("want an event, got err %v", d.err)
			}
			if e.Version != tc.version || e.PrevVersion != tc.cur.Version || e.Op != tc.op || e.WriterEpoch != 9 || e.Principal != "p" {
				t.Fatalf("event %+v", e)
			}
			if tc.cur.Live && string(e.Before) != string(tc.cur.Entry.Value) {
				t.Fatalf("before %s, want %s", e.Before, tc.cur.Entry.Value)
			}
			if r.Op == events.OpDelete && (e.Kind != events.KindDelete || string(e.After) != "null") {
				t.Fatalf("delete event %+v", e)
			}
		})
	}
}

func TestDecideCreatedAtAndTTL(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/k")
	created := now.Add(-time.Hour)
	cur := events.State{Version: 1, Live: true, Entry: events.Entry{Key: key.String(), Version: 1, Value: json.RawMessage(`1`), CreatedAt: created}}
	d := Decide(cur, &Request{Key: key, Op: events.OpPut, Value: json.RawMessage(`2`), TTLSeconds: 30}, now, 1)
	if !d.event.CreatedAt.Equal(created) {
		t.Fatalf("an update changed createdAt to %v", d.event.CreatedAt)
	}
	if d.event.ExpiresAt == nil || !d.event.ExpiresAt.Equal(now.Add(30*time.Second)) || d.event.Semantics.TTLSeconds != 30 {
		t.Fatalf("ttl not applied: %+v", d.event)
	}
}

func TestDecideRequestID(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/k")
	r := &Request{Key: key, Op: events.OpPut, Value: json.RawMessage(`1`), ExpectedVersion: ptr(0), RequestID: "r-1", Principal: "p"}
	first := Decide(events.State{}, r, now, 1)
	st := first.event.State()

	again := *r
	if d := Decide(st, &again, now.Add(time.Second), 1); d.event != nil || d.err != nil || !d.result.Replayed || d.result.Entry.Version != 1 {
		t.Fatalf("replay: %+v", d)
	}
	other := *r
	other.Value = json.RawMessage(`2`)
	if d := Decide(st, &other, now, 1); events.ErrorCode(d.err) != events.EConflict || d.conflict.Reason != "request_id_reused" {
		t.Fatalf("reused requestId: %+v", d)
	}
	otherPrincipal := *r
	otherPrincipal.Principal = "q"
	if d := Decide(st, &otherPrincipal, now, 1); events.ErrorCode(d.err) != events.EConflict {
		t.Fatalf("another principal's same requestId must not replay: %+v", d)
	}
}
