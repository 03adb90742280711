package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/schemas"
	"github.com/eskv/eskv/testenv"
)

// TestDeniedWriteAudited: a PUT refused to a read-only token (403) leaves
// exactly one kv.conflicts record, reason forbidden, with the principal
// and the op and without any value (neither the attempted nor the stored
// one); kv.changes and the key are unchanged. A refused read leaves none.
func TestDeniedWriteAudited(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	k := secBase + "denied"
	expect(t, "create", s.do("PUT", k, acmeToken, `{"value":"stored-secret","semantics":{"purpose":"config"}}`), 200, "", "")
	expect(t, "read by write-only", s.do("GET", k, writerTok, nil), 403, contract.EForbidden, "key")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events0, ends := s.readLogEnds(ctx)

	expect(t, "put by reader", s.do("PUT", k, readerTok, `{"value":"attempted-secret"}`), 403, contract.EForbidden, "key")

	var got []decide.Conflict
	testenv.WaitForNil(t, 30*time.Second, "the denial in kv.conflicts", func() error {
		got = s.readConflicts(t)
		if len(got) == 0 {
			return fmt.Errorf("no kv.conflicts record")
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // a second record would be a bug: give it time to show
	if got = s.readConflicts(t); len(got) != 1 {
		t.Fatalf("%d kv.conflicts records, want 1: %+v", len(got), got)
	}
	c := got[0]
	if c.Reason != decide.ReasonForbidden || c.Principal != "acme-reader" || c.Op != contract.OpPut ||
		c.Key != strings.TrimPrefix(k, "/v1/kv/") || c.Scope != "tenant/acme/project/sec" || c.Semantics.Purpose != "config" {
		t.Fatalf("record %+v", c)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Attempted) != "null" || string(c.Current) != "null" || strings.Contains(string(b), "secret") {
		t.Fatalf("the record carries a value: %s", b)
	}
	if err := schemas.ValidateConflict(b); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}

	events1, ends1 := s.readLogEnds(ctx)
	if len(events1) != len(events0) || fmt.Sprint(ends1) != fmt.Sprint(ends) {
		t.Fatalf("kv.changes moved: %d events (ends %v), before %d (ends %v)", len(events1), ends1, len(events0), ends)
	}
	if e := s.do("GET", k, acmeToken, nil).entry(t); e.Version != 1 || string(e.Value) != `"stored-secret"` {
		t.Fatalf("the key changed: %+v", e)
	}
}
