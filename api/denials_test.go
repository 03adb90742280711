package api_test

import (
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestDeniedWritesAudited: a write refused with 403 is handed to the
// writer's AuditDenied once, with its op, key, principal and (DELETE)
// requestId; a refused read, listing or unauthenticated request is not,
// nor is a request that is not refused.
func TestDeniedWritesAudited(t *testing.T) {
	const k = "/v1/kv/tenant/acme/project/p/k"
	for _, tc := range []struct {
		name, method, path, body, tok string
		status                        int
		want                          *deniedWrite
	}{
		{"PutByReader", "PUT", k, `{"value":1}`, readerTok, 403, &deniedWrite{"tenant/acme/project/p/k", contract.OpPut, "reader", ""}},
		{"PatchByReader", "PATCH", k, `{"set":{"a":1}}`, readerTok, 403, &deniedWrite{"tenant/acme/project/p/k", contract.OpPatch, "reader", ""}},
		{"DeleteByReader", "DELETE", k + "?requestId=r-1", "", readerTok, 403, &deniedWrite{"tenant/acme/project/p/k", contract.OpDelete, "reader", "r-1"}},
		{"IncrementByReader", "POST", k + ":increment", `{"by":1}`, readerTok, 403, &deniedWrite{"tenant/acme/project/p/k", contract.OpIncrement, "reader", ""}},
		{"AcquireOtherTenant", "POST", "/v1/kv/tenant/beta/project/p/l:acquire", `{"holder":"h"}`, acmeTok, 403,
			&deniedWrite{"tenant/beta/project/p/l", contract.OpLockAcquire, "acme", ""}},
		{"GetByWriteOnly", "GET", k, "", writerTok, 403, nil},
		{"CounterByWriteOnly", "GET", k + ":counter", "", writerTok, 403, nil},
		{"ListByWriteOnly", "GET", "/v1/kv?prefix=tenant/acme/project/p/", "", writerTok, 403, nil},
		{"PutUnknownToken", "PUT", k, `{"value":1}`, "nope-0123456789abcdef", 401, nil},
		{"PutBadKey", "PUT", "/v1/kv/tenant/acme/project/p/K", `{"value":1}`, readerTok, 400, nil},
		{"PutAllowed", "PUT", k, `{"value":1}`, acmeTok, 200, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := mustAuthServer(t, grants)
			rec := a.do(tc.method, tc.path, tc.body, "Bearer "+tc.tok)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			switch {
			case tc.want == nil && len(a.w.denied) != 0:
				t.Fatalf("audited %+v, want nothing", a.w.denied)
			case tc.want != nil && (len(a.w.denied) != 1 || a.w.denied[0] != *tc.want):
				t.Fatalf("audited %+v, want once %+v", a.w.denied, *tc.want)
			}
		})
	}
}

// TestDeniedWritesAuditBudget: a principal's denied writes are audited
// within its denial-log budget, so a flood of refused writes cannot flood
// the audit trail.
func TestDeniedWritesAuditBudget(t *testing.T) {
	a := mustAuthServer(t, grants)
	for range 200 {
		a.do("PUT", "/v1/kv/tenant/acme/project/p/k", `{"value":1}`, "Bearer "+readerTok)
	}
	if n := len(a.w.denied); n < 1 || n > 20 {
		t.Fatalf("%d of 200 denied writes audited, want a few (the log budget)", n)
	}
}
