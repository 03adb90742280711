package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/writer"
)

// TestTouchKeepsValueMovesExpiry: through the whole stack, a touched key
// keeps its value byte for byte, gets the new expiry (in the answer, a
// read, the projection and a watch), is not swept at its old expiry but
// at the new one, and persist removes the expiry; a repeated touch is a
// replay, a stale expectedVersion a conflict, and a missing key or a held
// lock refuse it.
func TestTouchKeepsValueMovesExpiry(t *testing.T) {
	t.Parallel()
	s := mustStack(t, inproc.WriterConfig(func(c *writer.Config) { c.SweepInterval = 100 * time.Millisecond }))
	c := s.client()
	ctx := context.Background()
	k, p := scope+"touch/session", scope+"touch/forever"
	put, err := c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(`{"b": 2, "a": [1, 2]}`), TTL: 2 * time.Second,
		Semantics: contract.Semantics{Purpose: "config", Producer: "touch-test"}, SpecRef: "spec/touch"})
	if err != nil {
		t.Fatal(err)
	}
	oldExpiry := *put.Entry.ExpiresAt
	one := int64(1)
	touched, err := c.Touch(ctx, client.TouchRequest{Key: k, TTL: 6 * time.Second, ExpectedVersion: &one, RequestID: "touch-1"})
	if err != nil {
		t.Fatal(err)
	}
	newExpiry := *touched.Entry.ExpiresAt
	if touched.Entry.Version != 2 || string(touched.Entry.Value) != string(put.Entry.Value) || !newExpiry.After(oldExpiry.Add(3*time.Second)) ||
		touched.Entry.Semantics.Producer != "touch-test" || touched.Entry.Semantics.TTLSeconds != 6 || touched.Entry.SpecRef != "spec/touch" {
		t.Fatalf("touch answered %+v after put %+v", touched.Entry, put.Entry)
	}
	checkTouchRetries(t, c, k, touched.Entry)
	checkTouchPersist(t, c, p)
	waitProjected(t, s)
	var projected time.Time
	if err := s.pg.Pool.QueryRow(ctx, `SELECT expires_at FROM kv_entries WHERE key = $1`, k).Scan(&projected); err != nil || !projected.Equal(newExpiry) {
		t.Fatalf("projected expiry %v (%v), want %v", projected, err, newExpiry)
	}
	// Past the old expiry (and many sweeps): still there, unchanged.
	time.Sleep(time.Until(oldExpiry.Add(1500 * time.Millisecond)))
	if e, err := c.Get(ctx, k); err != nil || e.Version != 2 || string(e.Value) != string(put.Entry.Value) {
		t.Fatalf("after the old expiry: %+v %v", e, err)
	}
	var expire contract.Event
	testenv.WaitFor(t, 30*time.Second, "the sweeper's expire event at the new expiry", func() bool {
		for _, e := range keyEvents(t, s, k) {
			if e.Kind == contract.KindExpire {
				expire = e
				return true
			}
		}
		return false
	})
	if expire.Version != 3 || expire.TS.Before(newExpiry) || string(expire.Before) != string(put.Entry.Value) {
		t.Fatalf("expire event %+v, want version 3 at or after %v", expire, newExpiry)
	}
	if e, err := c.Get(ctx, p); err != nil || e.ExpiresAt != nil {
		t.Fatalf("the persisted key: %+v %v", e, err)
	}
	checkTouchWatched(t, c, k, put.Entry, newExpiry)
}

// checkTouchRetries: the touch of k that answered e, repeated with its
// requestId, is a replay; with a stale version a conflict naming e's;
// a missing key is not_found and a held lock lock_held.
func checkTouchRetries(t *testing.T, c *client.Client, k string, e contract.Entry) {
	t.Helper()
	ctx := context.Background()
	one := int64(1)
	again, err := c.Touch(ctx, client.TouchRequest{Key: k, TTL: 6 * time.Second, ExpectedVersion: &one, RequestID: "touch-1"})
	if err != nil || !again.Replayed || again.Entry.Version != e.Version {
		t.Fatalf("repeated touch: %+v %v", again, err)
	}
	_, err = c.Touch(ctx, client.TouchRequest{Key: k, TTL: time.Minute, ExpectedVersion: &one})
	var ce *contract.Error
	if !errorsAs(err, &ce) || ce.Code != contract.EConflict || ce.Current == nil || ce.Current.Version != e.Version {
		t.Fatalf("stale touch: %v", err)
	}
	if _, err := c.Touch(ctx, client.TouchRequest{Key: scope + "touch/missing", TTL: time.Minute}); contract.ErrorCode(err) != contract.ENotFound {
		t.Fatalf("touch of a missing key: %v", err)
	}
	if _, err := c.AcquireLock(ctx, client.LockRequest{Key: scope + "touch/lock", Holder: "h", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Touch(ctx, client.TouchRequest{Key: scope + "touch/lock", TTL: time.Hour}); contract.ErrorCode(err) != contract.ELockHeld {
		t.Fatalf("touch of a held lock: %v", err)
	}
}

// checkTouchPersist: a touch with persist removes p's expiry.
func checkTouchPersist(t *testing.T, c *client.Client, p string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Put(ctx, client.PutRequest{Key: p, Value: json.RawMessage(`"v"`), TTL: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Touch(ctx, client.TouchRequest{Key: p, Persist: true})
	if err != nil || res.Entry.ExpiresAt != nil || res.Entry.Semantics.TTLSeconds != 0 || string(res.Entry.Value) != `"v"` {
		t.Fatalf("persist: %+v %v", res.Entry, err)
	}
}

// checkTouchWatched: a watch of k from its first version sees the put,
// the touch (value unchanged, the new expiry) and the expiry.
func checkTouchWatched(t *testing.T, c *client.Client, k string, put contract.Entry, newExpiry time.Time) {
	t.Helper()
	w := startWatch(t, c, client.WatchOptions{Key: k, FromVersion: 1})
	var evs []contract.WatchEvent
	testenv.WaitFor(t, 30*time.Second, "the watch of the touched key", func() bool {
		var err error
		if evs, err = w.events(); err != nil {
			t.Fatalf("watch: %v", err)
		}
		return len(evs) >= 3
	})
	tch := evs[1]
	if evs[0].Op != contract.OpSet || tch.Op != contract.OpTouch || tch.Kind != contract.KindPut || evs[2].Op != contract.OpExpire {
		t.Fatalf("watched %+v", evs)
	}
	if tch.Version != 2 || string(tch.Value) != string(put.Value) || tch.ExpiresAt == nil || !tch.ExpiresAt.Equal(newExpiry) {
		t.Fatalf("watched touch %+v, want value %s expiring %v", tch, put.Value, newExpiry)
	}
}

// TestAuditTouch: a touch reaches the audit trail as a row with op
// touch, a stale one as a version_mismatch conflict with op touch, and
// verify finds nothing wrong.
func TestAuditTouch(t *testing.T) {
	t.Parallel()
	s, at := mustAuditedStack(t)
	c := s.client()
	ctx := context.Background()
	k := "tenant/acme/project/coord/touched"
	if _, err := c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(`{"n":1}`), TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Touch(ctx, client.TouchRequest{Key: k, TTL: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	if _, err := c.Touch(ctx, client.TouchRequest{Key: k, Persist: true, ExpectedVersion: &one}); contract.ErrorCode(err) != contract.EConflict {
		t.Fatalf("stale touch: %v", err)
	}
	waitAudited(t, s, 60*time.Second)
	if got := at.count(t, "SELECT count() FROM audit_events FINAL WHERE op = 'touch' AND key = ? AND version = 2", k); got != 1 {
		t.Errorf("%d audit rows of the touch, want 1", got)
	}
	if got := at.count(t, "SELECT count() FROM audit_conflicts FINAL WHERE op = 'touch' AND reason = 'version_mismatch' AND key = ?", k); got != 1 {
		t.Errorf("%d conflict rows of the stale touch, want 1", got)
	}
	rep := at.verify(t, s)
	if len(rep.Discrepancies) > 0 || rep.Rows != len(s.readLog(ctx)) || rep.Conflicts != 1 {
		t.Fatalf("verify: %d rows, %d conflicts, discrepancies %v", rep.Rows, rep.Conflicts, rep.Discrepancies)
	}
}
