package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/writer"
)

// seedKeys writes n keys prefix+"k%05d" (value the index) in
// transactions of contract.MaxTxnOps puts, each with ttl seconds (0:
// none).
func seedKeys(t *testing.T, s *stack, prefix string, from, n, ttl int) {
	t.Helper()
	for i := from; i < from+n; i += contract.MaxTxnOps {
		var ops []string
		for j := i; j < min(i+contract.MaxTxnOps, from+n); j++ {
			sem := ""
			if ttl > 0 {
				sem = fmt.Sprintf(`,"semantics":{"ttlSeconds":%d}`, ttl)
			}
			ops = append(ops, fmt.Sprintf(`{"op":"put","key":"%sk%05d","value":%d%s}`, prefix, j, j, sem))
		}
		if r := s.do("POST", "/v1/txn", devToken, `{"ops":[`+strings.Join(ops, ",")+`]}`); r.Status != 200 {
			t.Fatalf("seed %s: %d %s", prefix, r.Status, r.Body)
		}
	}
}

// liveKeys counts the keys a keys-only listing of prefix answers.
func liveKeys(t *testing.T, c *client.Client, prefix string) int {
	t.Helper()
	n := 0
	for _, err := range c.ListKeysAll(context.Background(), client.ListOptions{Prefix: prefix}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// TestDeleteRangeAtomic: a range delete of 500 keys, a held lock and a
// set under a prefix deletes them all in one transaction — a watcher of
// the prefix sees every delete, each with its key's next version, under
// one txnId with txnSize the count — and nothing outside the prefix; a
// second one deletes nothing.
func TestDeleteRangeAtomic(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := context.Background()
	prefix, outside := scope+"rd-atomic/a/", scope+"rd-atomic/ab"
	seedKeys(t, s, prefix, 0, 500, 0)
	if _, err := c.Put(ctx, client.PutRequest{Key: outside, Value: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireLock(ctx, client.LockRequest{Key: prefix + "lock", Holder: "someone", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SAdd(ctx, client.SetRequest{Key: prefix + "set", Member: "m"}); err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, c, client.WatchOptions{Prefix: prefix})
	waitWatching(t, s, w, prefix+"sentinel")
	watched, _ := w.events()
	a, err := c.DeleteRange(ctx, client.DeleteRangeRequest{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	const want = 500 + 3 // the seeded keys, the lock, the set and the sentinel
	if a.Count != want || a.Truncated || a.TxnID == "" {
		t.Fatalf("range delete answered %+v, want %d keys in one transaction", a, want)
	}
	var deletes []contract.WatchEvent
	testenv.WaitFor(t, 30*time.Second, "the watcher to see every delete", func() bool {
		evs, err := w.events()
		if err != nil {
			t.Fatal(err)
		}
		deletes = evs[len(watched):]
		return len(deletes) >= want
	})
	seen := map[string]bool{}
	for _, e := range deletes {
		if e.Op != contract.OpDelete || e.TxnID != a.TxnID || e.TxnSize != want || seen[e.Key] {
			t.Fatalf("watched %+v, want a delete of a new key in txn %s of %d", e, a.TxnID, want)
		}
		seen[e.Key] = true
	}
	if n := liveKeys(t, c, prefix); n != 0 {
		t.Fatalf("%d keys left under %s", n, prefix)
	}
	if e, err := c.Get(ctx, outside); err != nil || e.Version != 1 {
		t.Fatalf("the key outside the prefix: %+v %v", e, err)
	}
	if a, err := c.DeleteRange(ctx, client.DeleteRangeRequest{Prefix: prefix}); err != nil || a.Count != 0 || a.TxnID != "" {
		t.Fatalf("a second range delete answered %+v %v, want none deleted", a, err)
	}
	waitProjected(t, s) // every event valid against the event JSON Schema, txnSize 503 too
}

// TestDeleteRangeChunked: over 2,500 keys a range delete is refused
// too_many_keys and deletes nothing; chunked, it deletes 1,000, 1,000
// and 500 keys, answering truncated with a cursor until the last chunk.
func TestDeleteRangeChunked(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := context.Background()
	prefix := scope + "rd-chunked/"
	seedKeys(t, s, prefix, 0, 2500, 0)
	_, err := c.DeleteRange(ctx, client.DeleteRangeRequest{Prefix: prefix})
	var e *contract.Error
	if !errors.As(err, &e) || e.Code != contract.ETooManyKeys || e.Field != "prefix" {
		t.Fatalf("a range delete of 2,500 keys: %v, want too_many_keys", err)
	}
	if n := liveKeys(t, c, prefix); n != 2500 {
		t.Fatalf("%d keys after a refused range delete, want 2500", n)
	}
	cursor := ""
	for i, want := range []int{1000, 1000, 500} {
		a, err := c.DeleteRange(ctx, client.DeleteRangeRequest{Prefix: prefix, Chunked: true, Cursor: cursor})
		if err != nil || a.Count != want || a.Truncated != (i < 2) || (a.NextCursor != "") != (i < 2) {
			t.Fatalf("chunk %d: %+v %v, want %d deleted", i, a, err, want)
		}
		if i < 2 && a.NextCursor != fmt.Sprintf("%sk%05d", prefix, 1000*(i+1)-1) {
			t.Fatalf("chunk %d: next cursor %q", i, a.NextCursor)
		}
		cursor = a.NextCursor
	}
	if n := liveKeys(t, c, prefix); n != 0 {
		t.Fatalf("%d keys left after the chunks", n)
	}
}

// TestDeleteRangeRights: a range delete needs the write right on every
// key under its prefix, which lies inside one project: another tenant's
// project and a reader are refused 403, a prefix spanning projects 400,
// and nothing is deleted.
func TestDeleteRangeRights(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	prefix, other := scope+"rd-rights/", "tenant/globex/project/p/rd-rights/"
	seedKeys(t, s, prefix, 0, 3, 0)
	seedKeys(t, s, other, 0, 3, 0)
	for _, tc := range []struct {
		name, token, prefix string
		status              int
		code                string
	}{
		{"OtherTenantsProject", acmeToken, other, 403, "forbidden"},
		{"Reader", readerTok, prefix, 403, "forbidden"},
		{"SpanningProjects", devToken, "tenant/acme/project/", 400, "invalid"},
		{"Tenant", devToken, "tenant/acme/", 400, "invalid"},
	} {
		for _, path := range []string{"/v1/kv:deleteRange", "/v1/kv:expireDue"} {
			r := s.do("POST", path, tc.token, `{"prefix":"`+tc.prefix+`"}`)
			if r.Status != tc.status || r.errorBody(t).Code != tc.code {
				t.Errorf("%s %s: %d %s, want %d %s", tc.name, path, r.Status, r.Body, tc.status, tc.code)
			}
		}
	}
	c := s.client()
	if n, m := liveKeys(t, c, prefix), liveKeys(t, c, other); n != 3 || m != 3 {
		t.Fatalf("keys left: %d and %d, want 3 and 3", n, m)
	}
	if r := s.do("POST", "/v1/kv:deleteRange", acmeToken, `{"prefix":"`+prefix+`"}`); r.Status != 200 || !strings.Contains(string(r.Body), `"count":3`) {
		t.Fatalf("acme's own range delete: %d %s", r.Status, r.Body)
	}
}

// TestExpireDue: with the sweeper idle, expireDue under a prefix expires
// exactly the keys past their expiry, with the sweeper's expire events,
// answers their count, and leaves the others and the keys outside the
// prefix; a second call expires nothing.
func TestExpireDue(t *testing.T) {
	t.Parallel()
	s := mustStack(t, inproc.WriterConfig(func(c *writer.Config) { c.SweepInterval = time.Hour }))
	c := s.client()
	ctx := context.Background()
	prefix := scope + "due/"
	seedKeys(t, s, prefix+"short/", 0, 30, 1)
	seedKeys(t, s, prefix+"long/", 0, 10, 3600)
	seedKeys(t, s, prefix+"none/", 0, 10, 0)
	seedKeys(t, s, scope+"due-outside/", 0, 5, 1)
	time.Sleep(1500 * time.Millisecond)
	a, err := c.ExpireDue(ctx, prefix, "")
	if err != nil || a.Count != 30 || a.Truncated {
		t.Fatalf("expireDue answered %+v %v, want 30", a, err)
	}
	if n := liveKeys(t, c, prefix); n != 20 {
		t.Fatalf("%d keys left under %s, want 20", n, prefix)
	}
	waitProjected(t, s)
	var left int
	if err := s.pg.Pool.QueryRow(ctx, `SELECT count(*) FROM kv_entries WHERE live AND key LIKE $1`, scope+"due-outside/%").Scan(&left); err != nil || left != 5 {
		t.Fatalf("keys outside the prefix left live: %d %v, want 5 (the sweeper is idle)", left, err)
	}
	evs := keyEvents(t, s, prefix+"short/k00007")
	if last := evs[len(evs)-1]; len(evs) != 2 || last.Kind != contract.KindExpire || last.Op != contract.OpExpire || last.TxnID != "" {
		t.Fatalf("events of an expired key: %+v", evs)
	}
	if a, err := c.ExpireDue(ctx, prefix, ""); err != nil || a.Count != 0 {
		t.Fatalf("a second expireDue: %+v %v", a, err)
	}
}

// TestAuditRanges: a range delete's events reach the audit trail as
// delete rows under one txn_id, an expireDue's as expire rows, and
// verify finds nothing wrong.
func TestAuditRanges(t *testing.T) {
	t.Parallel()
	s, at := mustAuditedStack(t)
	c := s.client()
	ctx := context.Background()
	prefix, due := "tenant/acme/project/coord/rd/", "tenant/acme/project/coord/due/"
	seedKeys(t, s, prefix, 0, 12, 0)
	seedKeys(t, s, due, 0, 4, 1)
	a, err := c.DeleteRange(ctx, client.DeleteRangeRequest{Prefix: prefix})
	if err != nil || a.Count != 12 {
		t.Fatalf("range delete: %+v %v", a, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if e, err := c.ExpireDue(ctx, due, ""); err != nil || e.Count+swept(t, s, due) != 4 {
		t.Fatalf("expireDue: %+v %v", e, err)
	}
	waitAudited(t, s, 60*time.Second)
	if got := at.count(t, "SELECT count() FROM audit_events FINAL WHERE op = 'delete' AND txn_id = ? AND txn_size = 12 AND startsWith(key, ?)", a.TxnID, prefix); got != 12 {
		t.Errorf("%d audit rows of the range delete, want 12", got)
	}
	if got := at.count(t, "SELECT count() FROM audit_events FINAL WHERE op = 'expire' AND startsWith(key, ?)", due); got != 4 {
		t.Errorf("%d audit rows of the expiries, want 4", got)
	}
	rep := at.verify(t, s)
	if len(rep.Discrepancies) > 0 || rep.Rows != len(s.readLog(ctx)) {
		t.Fatalf("verify: %d rows, discrepancies %v", rep.Rows, rep.Discrepancies)
	}
}

// swept counts the expire events under prefix the sweeper appended.
func swept(t *testing.T, s *stack, prefix string) int {
	t.Helper()
	n := 0
	for _, e := range s.readLog(context.Background()) {
		if e.Kind == contract.KindExpire && strings.HasPrefix(e.Key, prefix) && e.Principal == writer.SweeperPrincipal {
			n++
		}
	}
	return n
}

// TestAuditRangeRefused: an atomic range delete refused too_many_keys
// deletes nothing and is recorded as a refused write of a key is: one
// row in audit_conflicts (op delete_range, reason too_many_keys, key the
// prefix) under the correlation id of its 409 answer, and one WARN line
// naming the op, the prefix and that id.
func TestAuditRangeRefused(t *testing.T) {
	t.Parallel()
	var logs testenv.Buffer
	s := mustStack(t, inproc.Logs(&logs))
	at := mustAuditTrail(t)
	at.startAuditor(t, s)
	c := s.client()
	prefix := "tenant/acme/project/coord/many/"
	seedKeys(t, s, prefix, 0, contract.MaxRangeKeys+1, 0)
	_, err := c.DeleteRange(t.Context(), client.DeleteRangeRequest{Prefix: prefix})
	var e *contract.Error
	if !errors.As(err, &e) || e.Code != contract.ETooManyKeys || e.CorrelationID == "" {
		t.Fatalf("atomic range delete of %d keys: want too_many_keys with a correlation id, got %v", contract.MaxRangeKeys+1, err)
	}
	if n := liveKeys(t, c, prefix); n != contract.MaxRangeKeys+1 {
		t.Fatalf("%d keys left, want all %d", n, contract.MaxRangeKeys+1)
	}
	waitAudited(t, s, 60*time.Second)
	testenv.WaitFor(t, 60*time.Second, "the refusal's conflict row", func() bool {
		return at.count(t, "SELECT count() FROM audit_conflicts FINAL WHERE op = 'delete_range' AND reason = 'too_many_keys' AND key = ? AND conflict_id = ? AND tenant = 'acme' AND project = 'coord'",
			prefix, e.CorrelationID) == 1
	})
	if got := at.count(t, "SELECT count() FROM audit_conflicts FINAL"); got != 1 {
		t.Fatalf("%d conflict rows, want the refusal's alone", got)
	}
	var line string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, `"msg":"prefix write refused"`) {
			if line != "" {
				t.Fatalf("two refusal lines:\n%s%s", line, l)
			}
			line = l
		}
	}
	for _, want := range []string{`"level":"WARN"`, `"op":"delete_range"`, `"prefix":"` + prefix + `"`, `"reason":"too_many_keys"`, `"correlationId":"` + e.CorrelationID + `"`} {
		if !strings.Contains(line, want) {
			t.Fatalf("the refusal's log line %q lacks %s", line, want)
		}
	}
	rep := at.verify(t, s)
	if len(rep.Discrepancies) > 0 || rep.Conflicts != 1 {
		t.Fatalf("verify: %d rows, %d conflicts, discrepancies %v", rep.Rows, rep.Conflicts, rep.Discrepancies)
	}
}
