package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
)

// TestAuditCoordinationPrimitives: counters, locks, leader leases, field
// patches and the sweeper's expiries reach the audit trail like any write:
// one row per event with its op, a lost field compare-and-swap in
// audit_conflicts (reason field_mismatch), the abandoned lock in
// ttl_expirations with its semantics, and verify finds nothing wrong.
func TestAuditCoordinationPrimitives(t *testing.T) {
	t.Parallel()
	s, at := mustAuditedStack(t)
	c := s.client()
	ctx := context.Background()
	const p = "tenant/acme/project/coord/"
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Increment(ctx, client.IncrementRequest{Key: p + "counter", By: 5, Create: true}))
	must(c.Increment(ctx, client.IncrementRequest{Key: p + "counter", By: -2}))
	must(c.AcquireLock(ctx, client.LockRequest{Key: p + "deploy", Holder: "ci", TTL: time.Minute}))
	must(c.ExtendLock(ctx, client.LockRequest{Key: p + "deploy", Holder: "ci", TTL: time.Minute}))
	must(c.ReleaseLock(ctx, client.LockRequest{Key: p + "deploy", Holder: "ci"}))
	must(c.Elect(ctx, client.LockRequest{Key: p + "leader", Holder: "a", TTL: time.Minute}))
	must(c.Resign(ctx, client.LockRequest{Key: p + "leader", Holder: "a"}))
	must(c.Patch(ctx, client.PatchRequest{Key: p + "job", Create: true, Set: map[string]json.RawMessage{"state": json.RawMessage(`"pending"`)}}))
	must(c.Patch(ctx, client.PatchRequest{Key: p + "job", If: &client.FieldCondition{Field: "state", Equals: json.RawMessage(`"pending"`)},
		Set: map[string]json.RawMessage{"state": json.RawMessage(`"claimed"`)}}))
	if _, err := c.Patch(ctx, client.PatchRequest{Key: p + "job", If: &client.FieldCondition{Field: "state", Equals: json.RawMessage(`"pending"`)},
		Set: map[string]json.RawMessage{"state": json.RawMessage(`"claimed"`)}}); contract.ErrorCode(err) != contract.EFieldMismatch {
		t.Fatalf("second claim: %v", err)
	}
	must(c.AcquireLock(ctx, client.LockRequest{Key: p + "abandoned", Holder: "crashed", TTL: time.Second,
		Semantics: contract.Semantics{Producer: "scheduler"}}))
	testenv.WaitFor(t, 20*time.Second, "the sweeper's expire event", func() bool {
		for _, e := range s.readLog(ctx) {
			if e.Key == p+"abandoned" && e.Kind == contract.KindExpire {
				return true
			}
		}
		return false
	})
	waitAudited(t, s, 60*time.Second)

	wantOps := map[string]uint64{"increment": 2, "lock_acquire": 2, "lock_extend": 1, "lock_release": 1,
		"leader_elect": 1, "leader_resign": 1, "patch": 1, "field_cas": 1, "expire": 1}
	for op, n := range wantOps {
		if got := at.count(t, "SELECT count() FROM audit_events FINAL WHERE op = ?", op); got != n {
			t.Errorf("%d audit rows with op %s, want %d", got, op, n)
		}
	}
	if got := at.count(t, "SELECT count() FROM audit_conflicts FINAL WHERE reason = 'field_mismatch' AND op = 'field_cas' AND expected_version = -1"); got != 1 {
		t.Errorf("%d field_mismatch conflict rows, want 1", got)
	}
	if got := at.count(t, "SELECT count() FROM ttl_expirations WHERE key = ? AND purpose = 'lock' AND producer = 'scheduler' AND principal = 'eskv-sweeper'", p+"abandoned"); got != 1 {
		t.Errorf("%d ttl_expirations rows for the abandoned lock, want 1", got)
	}
	rep := at.verify(t, s)
	if len(rep.Discrepancies) > 0 || rep.Rows != len(s.readLog(ctx)) || rep.Conflicts != 1 {
		t.Fatalf("verify: %d rows, %d conflicts, discrepancies %v", rep.Rows, rep.Conflicts, rep.Discrepancies)
	}
}
