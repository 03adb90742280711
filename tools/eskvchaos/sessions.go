package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/tools/linz"
)

// The session workload: -session-clients clients each create a session
// (:session, a 2 s TTL) in a project of its own, attach one or two keys
// of their own (PUT with session) and try one of two shared locks
// (:acquire with session), then keep it alive a few times and revoke
// it, or stop heartbeating (a client paused or cut off: the sweeper ends
// the session at its expiry), or stall past the TTL and find it ended.
// The check, from the log alone (one project, so one partition, one
// order): no lock is granted to a session while it is held by another
// session whose end the log has not reached; when a session's end event
// is reached, no key or lock attached to it is still live (its end
// deleted or released each, in its transaction); each attachment is
// ended at most once, with the session's reason, under the end's txnId;
// an attached entry has no expiry of its own; and a session ended by
// expiry was past its expiresAt.
const (
	sessionTTL   = 2 // seconds
	sessionLocks = 2
	sessionsPrj  = "tenant/chaos/project/sessions/"
)

// sessionLockKeys are the locks the session clients contend for.
func sessionLockKeys() []string { return workloadKeys("sessions", "lock", sessionLocks) }

// sessionWorkload runs the session clients and counts their outcomes.
type sessionWorkload struct {
	collectionWorkload[struct{}]
}

func newSessionWorkload(c *clients) *sessionWorkload {
	return &sessionWorkload{newCollectionWorkload[struct{}](c, sessionLockKeys(), 8000)}
}

// run starts n clients and returns once stop is closed.
func (s *sessionWorkload) run(n int, seed uint64, stop <-chan struct{}) {
	s.collectionWorkload.run(n, seed, stop, func(id, seq int, rng *rand.Rand, lock, lockBase string) string {
		base := s.c.urls[rng.IntN(len(s.c.urls))] + "/v1/kv/"
		sess := fmt.Sprintf("%ssession-c%d-%d", sessionsPrj, id, seq)
		var ans contract.SessionAnswer
		outcome, _ := s.post(base+sess+":session", contract.SessionBody{TTLSeconds: sessionTTL, RequestID: fmt.Sprintf("chaos-sess-c%d-%d", id, seq)}, &ans)
		s.record("create " + outcome)
		if outcome != "ok" {
			return outcome
		}
		for j := range 1 + rng.IntN(2) {
			k := fmt.Sprintf("%ssvc-c%d-%d-%d", sessionsPrj, id, seq, j)
			s.record("attach " + s.send(http.MethodPut, base+k, contract.PutBody{Value: mustJSON(map[string]int{"c": id, "seq": seq}), Session: sess}))
		}
		s.record("lock " + s.send(http.MethodPost, lockBase+":acquire", contract.LockBody{Holder: fmt.Sprintf("c%d", id), Session: sess}))
		switch rng.IntN(4) {
		case 0: // stops heartbeating: the sweeper ends it
			s.record("abandoned")
			return "ok"
		case 1: // stalls past the TTL, then finds it ended
			time.Sleep(sessionTTL*time.Second + 700*time.Millisecond)
			o, _ := s.post(base+sess+":keepalive", contract.SessionWriteBody{}, &ans)
			s.record("late keepalive " + o)
			return "ok"
		}
		for range rng.IntN(3) {
			time.Sleep(600 * time.Millisecond)
			o, _ := s.post(base+sess+":keepalive", contract.SessionWriteBody{}, &ans)
			s.record("keepalive " + o)
		}
		o, _ := s.post(base+sess+":revoke", contract.SessionWriteBody{}, &ans)
		s.record("revoke " + o)
		return "ok"
	})
}

// send makes an attaching write (a put, an acquire): ok, refused (404 or
// 409: the session ended, the lock is held), failed or unknown.
func (s *sessionWorkload) send(method, url string, body any) string {
	b, _ := json.Marshal(body)
	a := s.c.do(method, url, b)
	switch {
	case a.err == nil && a.status == http.StatusOK:
		return "ok"
	case a.err == nil && (a.status == http.StatusNotFound || a.status == http.StatusConflict):
		return "refused"
	}
	if o, _ := classifyWrite(a, ""); o.Outcome == linz.Failed {
		return "failed"
	}
	return "unknown"
}

// settle waits until no session of the workload is live in the
// projection: the sessions the clients left end at their expiry, up to
// a sweep after it.
func (s *sessionWorkload) settle(ctx context.Context, db *pgxpool.Pool, timeout time.Duration) error {
	return settleNone(ctx, db, timeout, "sessions: %d sessions still live %s after the clients stopped (err %v)",
		`SELECT count(*) FROM kv_entries WHERE key LIKE $1 AND live`, sessionsPrj+"session-%")
}

// sessionFindings are the session workload's results and checks.
type sessionFindings struct {
	collectionFindings
	sessions, ended, expired, attached, endedKeys int
	violations                                    []string
}

// check folds the workload's events in log order.
func (s *sessionWorkload) check(evs []logcheck.Event) sessionFindings {
	f := sessionFindings{collectionFindings: collectionFindings{outcomes: map[string]int{}}}
	f.outcomes, _ = s.snapshot()
	owner := map[string]string{}         // live attached key or lock -> its session
	live := map[string]bool{}            // live keys of the project
	sessionExp := map[string]time.Time{} // a live session's expiry
	endedOnce := map[[2]string]bool{}    // (key, session) ended
	for _, le := range evs {
		e := le.Event
		if len(e.Key) < len(sessionsPrj) || e.Key[:len(sessionsPrj)] != sessionsPrj {
			continue
		}
		f.events++
		at := fmt.Sprintf("%s@%d at %d/%d", e.Key, e.Version, le.Partition, le.Offset)
		if e.Semantics.Purpose == contract.PurposeSession {
			if e.Live() {
				if e.Op == contract.OpSessionCreate {
					f.sessions++
				}
				if e.ExpiresAt != nil {
					sessionExp[e.Key] = *e.ExpiresAt
				}
				live[e.Key] = true
				continue
			}
			f.ended++
			if e.Kind == contract.KindExpire {
				f.expired++
				if exp, ok := sessionExp[e.Key]; ok && e.TS.Before(exp) {
					f.violations = append(f.violations, fmt.Sprintf("%s: expired at %s, before its expiry %s", at, e.TS.Format(time.RFC3339Nano), exp.Format(time.RFC3339Nano)))
				}
			}
			if e.Session == nil || e.Session.Key != e.Key || e.Session.Reason == "" || e.TxnID == "" {
				f.violations = append(f.violations, fmt.Sprintf("%s: a session's end without its session, reason or txnId", at))
			}
			delete(live, e.Key)
			delete(sessionExp, e.Key)
			for k, sess := range owner {
				if sess == e.Key && live[k] {
					f.violations = append(f.violations, fmt.Sprintf("%s: %s, attached to it, still live after its end", at, k))
				}
			}
			continue
		}
		switch {
		case e.Live() && e.Session != nil:
			f.attached++
			if e.ExpiresAt != nil {
				f.violations = append(f.violations, fmt.Sprintf("%s: attached to %s with an expiry of its own", at, e.Session.Key))
			}
			if prev, held := owner[e.Key]; held && live[e.Key] && prev != e.Session.Key && live[prev] && e.Semantics.Purpose == contract.PurposeLock {
				f.violations = append(f.violations, fmt.Sprintf("%s: granted to session %s while session %s holds it", at, e.Session.Key, prev))
			}
			if !live[e.Session.Key] {
				f.violations = append(f.violations, fmt.Sprintf("%s: attached to %s, which is not live", at, e.Session.Key))
			}
			owner[e.Key] = e.Session.Key
			live[e.Key] = true
		case e.Live(): // written without a session: no longer attached
			delete(owner, e.Key)
			live[e.Key] = true
		default:
			if e.Session != nil && e.Session.Reason != "" {
				f.endedKeys++
				pair := [2]string{e.Key, e.Session.Key}
				if endedOnce[pair] {
					f.violations = append(f.violations, fmt.Sprintf("%s: ended twice by session %s", at, e.Session.Key))
				}
				endedOnce[pair] = true
				if owner[e.Key] != e.Session.Key {
					f.violations = append(f.violations, fmt.Sprintf("%s: ended by session %s, which it was not attached to", at, e.Session.Key))
				}
			}
			delete(owner, e.Key)
			delete(live, e.Key)
		}
	}
	return f
}

func (f *sessionFindings) print(w io.Writer) {
	f.collectionFindings.print(w, "sessions", f.violations, fmt.Sprintf("%d sessions, %d ended (%d by expiry), %d attaching writes, %d attached keys and locks ended with their session; no lock held by two live sessions, no key of an ended session live after its end",
		f.sessions, f.ended, f.expired, f.attached, f.endedKeys))
}
