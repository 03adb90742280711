package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/writer"
)

// sessionEnd checks the log's events of a session's end: the session's
// last event and one delete or release per key of ended, all naming
// the session and reason under one txnId.
func sessionEnd(t *testing.T, s *stack, session, reason string, ended map[string]contract.Op) {
	t.Helper()
	evs := keyEvents(t, s, session)
	last := evs[len(evs)-1]
	if last.Live() || last.Session == nil || last.Session.Reason != reason || last.TxnID == "" || last.TxnSize != len(ended)+1 {
		t.Fatalf("the session's end %+v (session %+v), want reason %s over %d events", last, last.Session, reason, len(ended)+1)
	}
	for k, op := range ended {
		kevs := keyEvents(t, s, k)
		e := kevs[len(kevs)-1]
		if e.Op != op || e.Live() || e.TxnID != last.TxnID || e.Session == nil || e.Session.Key != session || e.Session.Reason != reason {
			t.Fatalf("%s's last event %+v (session %+v), want %s of the session's end", k, e, e.Session, op)
		}
	}
}

// TestSessionsEndAttached: through the whole stack, a session kept alive
// past its TTL keeps the key, lock and leadership attached to it (no
// one else takes the lock); Close revokes it, deleting the key and
// releasing both in one transaction whose events say why; a session not
// kept alive is ended by the sweeper with its key, and a DELETE of a
// session ends it too; attaching across projects, with a TTL, or to an
// ended session is refused.
func TestSessionsEndAttached(t *testing.T) {
	t.Parallel()
	s := mustStack(t, inproc.WriterConfig(func(c *writer.Config) { c.SweepInterval = 100 * time.Millisecond }))
	c := s.client()
	ctx := context.Background()
	sk, k, l, ld := scope+"sessions/a", scope+"services/web/a", scope+"locks/a", scope+"leaders/a"
	sess, err := client.NewSession(ctx, c, sk, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(`{"addr":"10.0.0.1:80"}`), Session: sess.Key()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireLock(ctx, client.LockRequest{Key: l, Holder: "a", Session: sess.Key()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Elect(ctx, client.LockRequest{Key: ld, Holder: "a", Session: sess.Key()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // past the TTL: the keep-alives hold it
	if e, err := c.Get(ctx, k); err != nil || e.ExpiresAt != nil {
		t.Fatalf("the attached key after the TTL: %+v %v", e, err)
	}
	if _, err := c.AcquireLock(ctx, client.LockRequest{Key: l, Holder: "b", TTL: time.Minute}); contract.ErrorCode(err) != contract.ELockHeld {
		t.Fatalf("another holder's acquire: %v, want lock_held", err)
	}
	info, err := c.GetSession(ctx, sk)
	if err != nil || len(info.Attached) != 3 {
		t.Fatalf("session %+v %v, want 3 attached", info, err)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, k); contract.ErrorCode(err) != contract.ENotFound {
		t.Fatalf("the key after Close: %v", err)
	}
	sessionEnd(t, s, sk, contract.SessionRevoked, map[string]contract.Op{k: contract.OpDelete, l: contract.OpLockRelease, ld: contract.OpLeaderResign})
	if _, err := c.AcquireLock(ctx, client.LockRequest{Key: l, Holder: "b", TTL: time.Minute}); err != nil {
		t.Fatalf("the lock after Close: %v", err)
	}

	t.Run("OKExpiry", func(t *testing.T) {
		sk, k := scope+"sessions/b", scope+"services/web/b"
		if _, err := c.CreateSession(ctx, sk, time.Second, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(`1`), Session: sk}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 30*time.Second, "the sweeper ends the session", func() bool {
			_, err := c.Get(ctx, k)
			return contract.ErrorCode(err) == contract.ENotFound
		})
		sessionEnd(t, s, sk, contract.SessionExpired, map[string]contract.Op{k: contract.OpDelete})
	})
	t.Run("OKDelete", func(t *testing.T) {
		sk, k := scope+"sessions/c", scope+"services/web/c"
		if _, err := c.CreateSession(ctx, sk, time.Minute, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(`1`), Session: sk}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Delete(ctx, sk, client.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		sessionEnd(t, s, sk, contract.SessionDeleted, map[string]contract.Op{k: contract.OpDelete})
	})
	t.Run("ErrRefused", func(t *testing.T) {
		sk := scope + "sessions/d"
		if _, err := c.CreateSession(ctx, sk, time.Minute, ""); err != nil {
			t.Fatal(err)
		}
		for name, tc := range map[string]struct {
			key, session string
			ttl          time.Duration
			code         string
		}{
			"OtherProject": {"tenant/acme/project/other/k", sk, 0, contract.EInvalid},
			"WithTTL":      {scope + "k-ttl", sk, time.Minute, contract.EInvalid},
			"Ended":        {scope + "k-ended", scope + "sessions/a", 0, contract.ENotFound},
			"NotSession":   {scope + "k-plain", k, 0, contract.ENotFound},
		} {
			if _, err := c.Put(ctx, client.PutRequest{Key: tc.key, Value: json.RawMessage(`1`), TTL: tc.ttl, Session: tc.session}); contract.ErrorCode(err) != tc.code {
				t.Errorf("%s: %v, want %s", name, err, tc.code)
			}
		}
		if _, err := c.CreateSession(ctx, sk, time.Minute, ""); contract.ErrorCode(err) != contract.EConflict {
			t.Errorf("a second create: %v, want conflict", err)
		}
		if r := s.do(http.MethodPut, "/v1/kv/"+sk, devToken, map[string]any{"value": 1}); r.Status != http.StatusConflict || r.errorBody(t).Code != contract.EWrongType {
			t.Errorf("a plain put over a session: %d", r.Status)
		}
	})
}

// TestAuditSessions: a session's events (create, attach, keep-alive, and
// its end with the attached keys') reach the audit trail, and verify
// finds nothing wrong.
func TestAuditSessions(t *testing.T) {
	t.Parallel()
	s, at := mustAuditedStack(t)
	c := s.client()
	ctx := context.Background()
	sk, k := "tenant/acme/project/coord/sessions/a", "tenant/acme/project/coord/services/a"
	if _, err := c.CreateSession(ctx, sk, time.Minute, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(`1`), Session: sk}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.KeepAlive(ctx, sk); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RevokeSession(ctx, sk); err != nil {
		t.Fatal(err)
	}
	waitAudited(t, s, 60*time.Second)
	for op, want := range map[string]uint64{"session_create": 1, "session_attach": 1, "session_keepalive": 1, "session_revoke": 1} {
		if got := at.count(t, "SELECT count() FROM audit_events FINAL WHERE op = ? AND key = ?", op, sk); got != want {
			t.Errorf("%d audit rows of %s, want %d", got, op, want)
		}
	}
	if got := at.count(t, "SELECT count() FROM audit_events FINAL WHERE op = 'delete' AND key = ? AND txn_size = 2", k); got != 1 {
		t.Errorf("%d audit rows of the attached key's delete, want 1", got)
	}
	rep := at.verify(t, s)
	if len(rep.Discrepancies) > 0 || rep.Rows != len(s.readLog(ctx)) {
		t.Fatalf("verify: %d rows, discrepancies %v", rep.Rows, rep.Discrepancies)
	}
}
