package decide

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// sessionFixture is a session's world as a batch reads it: a session
// s, a key k, a lock l, in one project; o is in another project.
type sessionFixture struct {
	now           time.Time
	s, k, l, o, x contract.Key
}

func newSessionFixture(t *testing.T) sessionFixture {
	t.Helper()
	return sessionFixture{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		s: mustKey(t, "tenant/a/project/b/sessions/s1"), k: mustKey(t, "tenant/a/project/b/services/web/1"),
		l: mustKey(t, "tenant/a/project/b/locks/l"), o: mustKey(t, "tenant/a/project/c/sessions/s1"),
		x: mustKey(t, "tenant/a/project/b/x")}
}

// session is the state of a live session at version v with attached,
// expiring at exp.
func (f sessionFixture) session(v int64, exp time.Time, attached ...contract.Attachment) keystate.State {
	if attached == nil {
		attached = []contract.Attachment{}
	}
	val, _ := json.Marshal(contract.SessionValue{TTLSeconds: 5, Attached: attached})
	return keystate.State{Version: v, Live: true, Entry: contract.Entry{Key: f.s.String(), Version: v, Value: val, CreatedAt: f.now.Add(-time.Minute),
		ExpiresAt: &exp, Semantics: contract.Semantics{Purpose: contract.PurposeSession, TTLSeconds: 5}}}
}

func (f sessionFixture) plain(k contract.Key, v int64) keystate.State {
	return keystate.State{Version: v, Live: true, Entry: contract.Entry{Key: k.String(), Version: v, Value: json.RawMessage(`"up"`),
		CreatedAt: f.now.Add(-time.Minute), Semantics: contract.Semantics{Purpose: "other"}}}
}

func (f sessionFixture) lock(v, token int64) keystate.State { return f.lockOf(v, token, "") }

// lockOf is the state of lock l held by holder h of principal p, its
// tenure attached to session (none when "").
func (f sessionFixture) lockOf(v, token int64, session string) keystate.State {
	val := fmt.Sprintf(`{"holder":"h","token":%d,"acquiredAt":"2026-11-29T11:00:00Z","principal":"p","session":%q}`, token, session)
	return keystate.State{Version: v, Live: true, Entry: contract.Entry{Key: f.l.String(), Version: v, Value: json.RawMessage(val),
		CreatedAt: f.now.Add(-time.Minute), Semantics: contract.Semantics{Purpose: contract.PurposeLock}}}
}

// TestSessionCreateKeepAlive: create starts a session with its TTL and no
// attached key (refused over a live key); keepalive moves its expiry and
// keeps its attached keys; neither writes what is no session.
func TestSessionCreateKeepAlive(t *testing.T) {
	f := newSessionFixture(t)
	soon, past := f.now.Add(2*time.Second), f.now.Add(-time.Second)
	att := contract.Attachment{Key: f.k.String(), Version: 3}
	for _, tc := range []struct {
		name string
		op   contract.Op
		cur  keystate.State
		code string
	}{
		{"OKCreate", contract.OpSessionCreate, keystate.State{}, ""},
		{"OKCreateAfterExpiry", contract.OpSessionCreate, f.session(4, past), ""},
		{"ErrCreateOverLive", contract.OpSessionCreate, f.session(4, soon), contract.EConflict},
		{"OKKeepAlive", contract.OpSessionKeepAlive, f.session(4, soon, att), ""},
		{"ErrKeepAliveExpired", contract.OpSessionKeepAlive, f.session(4, past), contract.ENotFound},
		{"ErrKeepAliveAbsent", contract.OpSessionKeepAlive, keystate.State{}, contract.ENotFound},
		{"ErrKeepAlivePlain", contract.OpSessionKeepAlive, f.plain(f.s, 2), contract.EWrongType},
		{"ErrRevokePlain", contract.OpSessionRevoke, f.plain(f.s, 2), contract.EWrongType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &KV{Header: Header{Key: f.s, Op: tc.op, Principal: "p"}, TTLSeconds: 5}
			if tc.op == contract.OpSessionCreate {
				c.ExpectedVersion = ptr(0)
			}
			d := c.Decide(Input{State: tc.cur, States: map[string]keystate.State{}}, testEnv(f.now, 1))
			if tc.code != "" {
				if contract.ErrorCode(d.Err) != tc.code || len(d.Appends()) > 0 {
					t.Fatalf("want %s, got %v %v", tc.code, d.Appends(), d.Err)
				}
				return
			}
			ev := d.Event
			if d.Err != nil || ev == nil || ev.Op != tc.op || ev.Kind != contract.KindPut || ev.Semantics.Purpose != contract.PurposeSession {
				t.Fatalf("decision %+v event %+v", d, ev)
			}
			if ev.ExpiresAt == nil || !ev.ExpiresAt.Equal(f.now.Add(5*time.Second)) {
				t.Fatalf("expiresAt %v, want now+5s", ev.ExpiresAt)
			}
			if tc.op == contract.OpSessionKeepAlive && (string(ev.After) != string(tc.cur.Entry.Value) || len(d.Result.Session.Attached) != 1) {
				t.Fatalf("keepalive changed the value: %s, answer %+v", ev.After, d.Result.Session)
			}
		})
	}
}

// TestSessionAttach: a put or an acquire naming a live session of its
// project appends its own event (no expiry) and the session's, listing
// it, under one txnId; an ended, absent, foreign or full session
// refuses it and nothing is appended.
func TestSessionAttach(t *testing.T) {
	f := newSessionFixture(t)
	soon, past := f.now.Add(2*time.Second), f.now.Add(-time.Second)
	full := make([]contract.Attachment, contract.MaxSessionKeys)
	states := map[string]keystate.State{}
	for i := range full {
		full[i] = contract.Attachment{Key: fmt.Sprintf("tenant/a/project/b/k%d", i), Version: 1}
		states[full[i].Key] = f.plain(mustKey(t, full[i].Key), 1)
	}
	stale := contract.Attachment{Key: f.x.String(), Version: 1} // x was rewritten since (version 2)
	for _, tc := range []struct {
		name     string
		session  contract.Key
		sess     keystate.State
		lock     bool
		code     string
		attached int // the session's attached keys after it
	}{
		{"OKPut", f.s, f.session(4, soon), false, "", 1},
		{"OKPutDropsStale", f.s, f.session(4, soon, stale), false, "", 1},
		{"OKPutReplacesItsOwn", f.s, f.session(4, soon, contract.Attachment{Key: f.k.String(), Version: 1}), false, "", 1},
		{"OKLock", f.s, f.session(4, soon), true, "", 1},
		{"ErrExpired", f.s, f.session(4, past), false, contract.ENotFound, 0},
		{"ErrAbsent", f.s, keystate.State{}, false, contract.ENotFound, 0},
		{"ErrNotSession", f.s, f.plain(f.s, 2), false, contract.EWrongType, 0},
		{"ErrOtherProject", f.o, f.session(4, soon), false, contract.EInvalid, 0},
		{"ErrFull", f.s, f.session(4, soon, full...), false, contract.ETooManyKeys, 0},
		{"ErrLockOfAnotherSession", f.s, f.session(4, soon), true, contract.ELockHeld, 0},
		{"ErrLockWithoutSession", f.s, f.session(4, soon), true, contract.ELockHeld, 0},
		{"OKLockReenteredSameSession", f.s, f.session(4, soon), true, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{States: map[string]keystate.State{tc.session.String(): tc.sess, f.x.String(): f.plain(f.x, 2)}}
			switch tc.name { // the lock held by holder h of principal p, token 7
			case "ErrLockOfAnotherSession":
				in.States[f.l.String()] = f.lockOf(9, 7, "tenant/a/project/b/sessions/other")
			case "ErrLockWithoutSession":
				in.States[f.l.String()] = f.lock(9, 7)
			case "OKLockReenteredSameSession":
				in.States[f.l.String()] = f.lockOf(9, 7, f.s.String())
			}
			for k, st := range states {
				in.States[k] = st
			}
			var c Command = &KV{Header: Header{Key: f.k, Op: contract.OpPut, Principal: "p"}, Value: json.RawMessage(`"up"`), Session: tc.session.String()}
			key := f.k
			if tc.lock {
				c = &Lock{Header: Header{Key: f.l, Op: contract.OpLockAcquire, Principal: "p"}, Holder: "h", Session: tc.session.String()}
				key = f.l
			}
			in.State = in.States[key.String()]
			d := c.Decide(in, testEnv(f.now, 1))
			evs := d.Appends()
			if tc.code != "" {
				if contract.ErrorCode(d.Err) != tc.code || len(evs) > 0 {
					t.Fatalf("want %s, got %v %v", tc.code, evs, d.Err)
				}
				return
			}
			if d.Err != nil || len(evs) != 2 {
				t.Fatalf("want two events, got %v %v", evs, d.Err)
			}
			kev, sev := evs[0], evs[1]
			if kev.Key != key.String() || kev.ExpiresAt != nil || kev.Session == nil || kev.Session.Key != tc.session.String() {
				t.Fatalf("key event %+v", kev)
			}
			if sev.Key != tc.session.String() || sev.Op != contract.OpSessionAttach || sev.Version != 5 || sev.ExpiresAt == nil || !sev.ExpiresAt.Equal(soon) {
				t.Fatalf("session event %+v", sev)
			}
			if kev.TxnID == "" || kev.TxnID != sev.TxnID || kev.TxnSize != 2 || sev.TxnSize != 2 {
				t.Fatalf("txn %q/%d %q/%d", kev.TxnID, kev.TxnSize, sev.TxnID, sev.TxnSize)
			}
			var v contract.SessionValue
			if err := json.Unmarshal(sev.After, &v); err != nil || len(v.Attached) != tc.attached || v.Attached[len(v.Attached)-1].Key != key.String() {
				t.Fatalf("session value %s", sev.After)
			}
			want := kev.Version
			switch {
			case tc.name == "OKLockReenteredSameSession":
				want = 7 // the tenure's token, kept
			case tc.lock:
				want = 1 // the token of the new tenure
			}
			if a := v.Attached[len(v.Attached)-1]; a.Version != want {
				t.Fatalf("attachment %+v, want version %d", a, want)
			}
		})
	}
}

// TestSessionEnd: a revoke, a DELETE of the session and its expiry each
// append, under one txnId, a delete (or release) of every attached key
// still the session's and the session's own end, all naming the session
// and why; a key rewritten since, released or taken again is left; a
// key whose state was not read refuses the end.
func TestSessionEnd(t *testing.T) {
	f := newSessionFixture(t)
	soon, past := f.now.Add(2*time.Second), f.now.Add(-time.Second)
	atts := []contract.Attachment{{Key: f.k.String(), Version: 3}, {Key: f.l.String(), Version: 7, Purpose: contract.PurposeLock}, {Key: f.x.String(), Version: 1}}
	for _, tc := range []struct {
		name   string
		op     contract.Op
		exp    time.Time
		states map[string]keystate.State
		reason string
		ended  []string // keys deleted or released, in order
		code   string
	}{
		{"OKRevoke", contract.OpSessionRevoke, soon, map[string]keystate.State{f.k.String(): f.plain(f.k, 3), f.l.String(): f.lock(9, 7), f.x.String(): f.plain(f.x, 2)},
			contract.SessionRevoked, []string{f.k.String(), f.l.String()}, ""},
		{"OKDelete", contract.OpDelete, soon, map[string]keystate.State{f.k.String(): f.plain(f.k, 3), f.l.String(): f.lock(9, 7), f.x.String(): f.plain(f.x, 1)},
			contract.SessionDeleted, []string{f.k.String(), f.l.String(), f.x.String()}, ""},
		{"OKExpire", contract.OpExpire, past, map[string]keystate.State{f.k.String(): f.plain(f.k, 3), f.l.String(): f.lock(9, 7), f.x.String(): {Version: 2}},
			contract.SessionExpired, []string{f.k.String(), f.l.String()}, ""},
		{"OKLeavesRetaken", contract.OpSessionRevoke, soon, map[string]keystate.State{f.k.String(): f.plain(f.k, 4), f.l.String(): f.lock(12, 11), f.x.String(): {Version: 2}},
			contract.SessionRevoked, nil, ""},
		{"ErrUnread", contract.OpSessionRevoke, soon, map[string]keystate.State{f.k.String(): f.plain(f.k, 3)}, "", nil, contract.EInternal},
		{"ErrRevokeExpired", contract.OpSessionRevoke, past, map[string]keystate.State{}, "", nil, contract.ENotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess := f.session(4, tc.exp, atts...)
			c := &KV{Header: Header{Key: f.s, Op: tc.op, Principal: "p"}}
			if tc.op == contract.OpExpire {
				c.ExpectedVersion = ptr(4)
			}
			d := c.Decide(Input{State: sess, States: tc.states}, testEnv(f.now, 1))
			evs := d.Appends()
			if tc.code != "" {
				if contract.ErrorCode(d.Err) != tc.code || len(evs) > 0 {
					t.Fatalf("want %s, got %v %v", tc.code, evs, d.Err)
				}
				return
			}
			if d.Err != nil || len(evs) != len(tc.ended)+1 {
				t.Fatalf("want %d events, got %v %v", len(tc.ended)+1, evs, d.Err)
			}
			last := evs[len(evs)-1]
			if last.Key != f.s.String() || last.Live() || last.Version != 5 {
				t.Fatalf("session's end %+v", last)
			}
			for i, ev := range evs {
				if ev.Session == nil || ev.Session.Key != f.s.String() || ev.Session.Reason != tc.reason || ev.TxnID != last.TxnID || ev.TxnSize != len(evs) || ev.Live() {
					t.Fatalf("event %d %+v session %+v", i, ev, ev.Session)
				}
				if i < len(tc.ended) && (ev.Key != tc.ended[i] || ev.Version != tc.states[ev.Key].Version+1) {
					t.Fatalf("event %d on %s@%d, want %s", i, ev.Key, ev.Version, tc.ended[i])
				}
			}
			if len(tc.ended) > 1 && evs[1].Op != contract.OpLockRelease {
				t.Fatalf("the lock's event is %s, want lock_release", evs[1].Op)
			}
		})
	}
}

// TestSessionRangeDelete: a range delete over a session and its attached
// keys deletes each key once, at its next version; an expireDue over a
// due session ends it with its attached keys (reason session_expired).
func TestSessionRangeDelete(t *testing.T) {
	f := newSessionFixture(t)
	atts := []contract.Attachment{{Key: f.k.String(), Version: 3}, {Key: f.x.String(), Version: 1}}
	sess, due := f.session(4, f.now.Add(time.Second), atts...), f.session(4, f.now.Add(-time.Second), atts...)
	for _, tc := range []struct {
		name   string
		op     contract.Op
		sess   keystate.State
		prefix string
		want   int
	}{
		{"OKAllUnderPrefix", contract.OpDeleteRange, sess, "", 3},
		{"OKSessionsOnly", contract.OpDeleteRange, sess, "sessions/", 3},
		{"OKExpireDue", contract.OpExpireDue, due, "", 3},
		{"OKExpireDueNotDue", contract.OpExpireDue, sess, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			states := map[string]keystate.State{f.s.String(): tc.sess, f.k.String(): f.plain(f.k, 3), f.x.String(): f.plain(f.x, 1)}
			c := &Range{Header: Header{Key: mustKey(t, "tenant/a/project/b/k"), Op: tc.op, Principal: "p"}, Prefix: "tenant/a/project/b/" + tc.prefix}
			keys := []string{f.s.String(), f.k.String(), f.x.String()}
			d := c.Decide(Input{States: states, Under: PrefixKeys{Keys: keys}}, testEnv(f.now, 1))
			seen := map[string]bool{}
			for _, ev := range d.Txn {
				if seen[ev.Key] || ev.Version != states[ev.Key].Version+1 {
					t.Fatalf("event %s@%d twice or at the wrong version", ev.Key, ev.Version)
				}
				seen[ev.Key] = true
			}
			if d.Err != nil || len(d.Txn) != tc.want {
				t.Fatalf("want %d events, got %d (%v)", tc.want, len(d.Txn), d.Err)
			}
			if tc.op == contract.OpExpireDue && tc.want > 0 {
				for _, ev := range d.Txn {
					if ev.Session == nil || ev.Session.Reason != contract.SessionExpired || ev.TxnSize != 3 {
						t.Fatalf("event %s@%d session %+v txnSize %d", ev.Key, ev.Version, ev.Session, ev.TxnSize)
					}
				}
			}
		})
	}
}
