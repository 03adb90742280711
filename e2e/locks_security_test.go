package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// writerTok may write tenant/acme/ but not read it.
const writerTok = inproc.WriterToken

const secBase = "/v1/kv/tenant/acme/project/sec/"

// expect fails the test unless r has the status and, for an error, the
// code and field.
func expect(t *testing.T, what string, r response, status int, code, field string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Body, status)
	}
	if code == "" {
		return
	}
	if e := r.errorBody(t); e.Code != code || e.Field != field {
		t.Fatalf("%s: %s, want code %s field %s", what, r.Body, code, field)
	}
}

// TestConflictsHideValuesFromWriteOnly: every 409 a write-only principal
// can provoke (version_conflict, wrong_type, lock_held, a reused
// requestId) tells it the version and code but neither the value nor a
// lock's holder; a principal that may read gets the value. A field
// condition is refused to the write-only principal outright (403 on if).
func TestConflictsHideValuesFromWriteOnly(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	const secret = "sk-live-SECRET123"
	obj, str, lock := secBase+"obj", secBase+"str", secBase+"lock"
	expect(t, "put obj", s.do("PUT", obj, acmeToken, `{"value":{"api":"`+secret+`"},"requestId":"r-1"}`), 200, "", "")
	expect(t, "put str", s.do("PUT", str, acmeToken, `{"value":"`+secret+`"}`), 200, "", "")
	expect(t, "acquire", s.do("POST", lock+":acquire", acmeToken, `{"holder":"`+secret+`","ttlSeconds":60}`), 200, "", "")
	for _, tc := range []struct {
		name, method, path, body, code string
	}{
		{"VersionConflict", "PUT", obj, `{"value":"x","expectedVersion":999999}`, contract.EConflict},
		{"FieldMismatch", "PATCH", obj, `{"set":{"b":1},"if":{"field":"api","equals":"guess"}}`, contract.EFieldMismatch},
		{"WrongTypeIncrement", "POST", str + ":increment", `{}`, contract.EWrongType},
		{"WrongTypePatch", "PATCH", str, `{"set":{"b":1}}`, contract.EWrongType},
		{"LockHeld", "POST", lock + ":acquire", `{"holder":"me"}`, contract.ELockHeld},
		{"LockHeldPlainPut", "PUT", lock, `{"value":1}`, contract.ELockHeld},
		{"NotLockHolder", "POST", lock + ":extend", `{"holder":"me"}`, contract.ENotLockHolder},
		{"RequestIDReused", "PUT", obj, `{"value":"other","requestId":"r-1"}`, contract.EConflict},
		{"DeleteConflict", "DELETE", obj + "?expectedVersion=9", ``, contract.EConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(tc.method, tc.path, writerTok, tc.body)
			e := r.errorBody(t)
			switch {
			case tc.code == contract.EFieldMismatch:
				expect(t, "field condition by write-only", r, http.StatusForbidden, contract.EForbidden, "if")
			case r.Status != http.StatusConflict || e.Code != tc.code || e.CurrentVersion == nil || *e.CurrentVersion < 1:
				t.Fatalf("write-only: %d %s, want 409 %s with the current version", r.Status, r.Body, tc.code)
			}
			if strings.Contains(string(r.Body), secret) || e.CurrentValue != nil {
				t.Fatalf("write-only principal was shown the value: %s", r.Body)
			}
			r = s.do(tc.method, tc.path, acmeToken, tc.body)
			if r.Status != http.StatusConflict || !strings.Contains(string(r.errorBody(t).CurrentValue), secret) {
				t.Fatalf("a reader must see the current value: %d %s", r.Status, r.Body)
			}
		})
	}
}

// lockAnswer decodes a lock answer.
func lockAnswer(t *testing.T, r response) contract.LockAnswer {
	t.Helper()
	var a contract.LockAnswer
	if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil {
		t.Fatalf("lock answer: %d %s", r.Status, r.Body)
	}
	return a
}

// TestLockTenureBelongsToPrincipal: another principal naming the same
// holder string can neither re-enter, extend nor release the lock; the
// principal that holds it re-enters with its own token.
func TestLockTenureBelongsToPrincipal(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	for _, tc := range []struct {
		name, acquire, extend, release, held, notHolder string
	}{
		{"Lock", ":acquire", ":extend", ":release", contract.ELockHeld, contract.ENotLockHolder},
		{"Leader", ":elect", ":heartbeat", ":resign", contract.ENotLeader, contract.ENotLeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := secBase + "tenure-" + strings.ToLower(tc.name)
			first := lockAnswer(t, s.do("POST", k+tc.acquire, acmeToken, `{"holder":"worker-1","ttlSeconds":60}`))
			expect(t, "other principal re-enters", s.do("POST", k+tc.acquire, devToken, `{"holder":"worker-1"}`), 409, tc.held, "holder")
			expect(t, "other principal extends", s.do("POST", k+tc.extend, devToken, `{"holder":"worker-1"}`), 409, tc.notHolder, "holder")
			expect(t, "other principal releases", s.do("POST", k+tc.release, devToken, `{"holder":"worker-1"}`), 409, tc.notHolder, "holder")
			again := lockAnswer(t, s.do("POST", k+tc.acquire, acmeToken, `{"holder":"worker-1","ttlSeconds":60}`))
			if again.Token != first.Token || !again.Reentered {
				t.Fatalf("re-entry by the holder's principal: %+v, first %+v", again, first)
			}
			expect(t, "holder releases", s.do("POST", k+tc.release, acmeToken, `{"holder":"worker-1"}`), 200, "", "")
		})
	}
}

// TestPlainWritesCannotForgeLocks: plain writes cannot create, rewrite or
// raise a lock; a break by version replaces the lock with a non-lock
// value, and the next tenure's token is greater than every earlier one.
func TestPlainWritesCannotForgeLocks(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	k := secBase + "forge"
	expect(t, "put lock", s.do("PUT", k, acmeToken, `{"value":{"holder":"squatter","token":9007199254740993},"semantics":{"purpose":"lock"}}`),
		400, contract.EInvalid, "semantics.purpose")
	expect(t, "put leader", s.do("PUT", k, acmeToken, `{"value":1,"semantics":{"purpose":"leader"}}`), 400, contract.EInvalid, "semantics.purpose")
	expect(t, "increment lock", s.do("POST", k+":increment", acmeToken, `{"create":true,"semantics":{"purpose":"lock"}}`), 400, contract.EInvalid, "semantics.purpose")
	expect(t, "nothing written", s.do("GET", k, acmeToken, nil), 404, contract.ENotFound, "key")

	first := lockAnswer(t, s.do("POST", k+":acquire", acmeToken, `{"holder":"a","ttlSeconds":60}`))
	expect(t, "patch token", s.do("PATCH", k, acmeToken, `{"set":{"token":0},"expectedVersion":`+strconv.FormatInt(first.Version, 10)+`}`), 409, contract.EWrongType, "key")
	expect(t, "patch purpose", s.do("PATCH", k, acmeToken, `{"set":{"token":0},"expectedVersion":`+strconv.FormatInt(first.Version, 10)+`,"semantics":{"purpose":"lock"}}`),
		400, contract.EInvalid, "semantics.purpose")
	if a := lockAnswer(t, s.do("GET", k+":lock", acmeToken, nil)); a.Token != first.Token || a.Version != first.Version {
		t.Fatalf("the lock changed: %+v, was %+v", a, first)
	}
	brk := s.do("PUT", k, acmeToken, `{"value":{"holder":"x","token":999999},"expectedVersion":`+strconv.FormatInt(first.Version, 10)+`}`)
	if e := brk.entry(t); brk.Status != 200 || e.Semantics.Purpose != "other" {
		t.Fatalf("break: %d %s", brk.Status, brk.Body)
	}
	expect(t, "broken value is no lock", s.do("GET", k+":lock", acmeToken, nil), 409, contract.EWrongType, "key")
	expect(t, "acquire over the broken value", s.do("POST", k+":acquire", acmeToken, `{"holder":"a"}`), 409, contract.EWrongType, "key")
	expect(t, "delete", s.do("DELETE", k, acmeToken, nil), 200, "", "")
	next := lockAnswer(t, s.do("POST", k+":acquire", devToken, `{"holder":"b","ttlSeconds":60}`))
	if next.Token <= first.Token || next.Token >= 999999 {
		t.Fatalf("next tenure's token %d: want greater than %d and the server's own", next.Token, first.Token)
	}
}

// TestWritesKeepSemantics: a PUT without semantics keeps the entry's
// purpose, producer, hints and specRef; its expiry is dropped unless
// keepTtl.
func TestWritesKeepSemantics(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	k := secBase + "job"
	first := s.do("PUT", k, acmeToken, `{"value":1,"ttlSeconds":3600,"specRef":"spec/job","semantics":{"purpose":"checkpoint","producer":"job-7","consumerHints":["dash"]}}`).entry(t)
	kept := s.do("PUT", k, acmeToken, `{"value":2,"keepTtl":true}`).entry(t)
	if kept.Semantics.Purpose != "checkpoint" || kept.Semantics.Producer != "job-7" || len(kept.Semantics.ConsumerHints) != 1 ||
		kept.SpecRef != "spec/job" || kept.ExpiresAt == nil || !kept.ExpiresAt.Equal(*first.ExpiresAt) {
		t.Fatalf("keepTtl put: %+v, first %+v", kept, first)
	}
	plain := s.do("PUT", k, acmeToken, `{"value":3}`).entry(t)
	if plain.Semantics.Purpose != "checkpoint" || plain.Semantics.Producer != "job-7" || plain.SpecRef != "spec/job" || plain.ExpiresAt != nil {
		t.Fatalf("plain put: %+v", plain)
	}
	if got := s.do("GET", k, acmeToken, nil).entry(t); got.Semantics.Producer != "job-7" || got.Version != plain.Version {
		t.Fatalf("read back: %+v", got)
	}
	expect(t, "keepTtl and ttlSeconds", s.do("PUT", k, acmeToken, `{"value":4,"keepTtl":true,"ttlSeconds":5}`), 400, contract.EInvalid, "keepTtl")
}

// TestConflictsCountAgainstTheKeysPurpose: the kv.conflicts records of a
// PUT without semantics, a PUT naming another purpose, a DELETE and an
// increment on a checkpoint key carry purpose checkpoint; a conflict on an
// absent key carries the request's purpose.
func TestConflictsCountAgainstTheKeysPurpose(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	k := secBase + "progress"
	expect(t, "create", s.do("PUT", k, acmeToken, `{"value":1,"semantics":{"purpose":"checkpoint"}}`), 200, "", "")
	for _, r := range []struct{ method, path, body string }{
		{"PUT", k, `{"value":2,"expectedVersion":9}`},
		{"PUT", k, `{"value":2,"expectedVersion":9,"semantics":{"purpose":"config"}}`},
		{"DELETE", k + "?expectedVersion=9", ``},
		{"POST", k + ":increment", `{"expectedVersion":9}`},
		{"PUT", secBase + "absent", `{"value":2,"expectedVersion":9,"semantics":{"purpose":"cursor"}}`},
	} {
		expect(t, r.method+" "+r.path, s.do(r.method, r.path, acmeToken, r.body), 409, contract.EConflict, "expectedVersion")
	}
	got := map[string]int{}
	for _, c := range s.readConflicts(t) {
		got[c.Semantics.Purpose]++
	}
	if want := map[string]int{"checkpoint": 4, "cursor": 1}; !maps.Equal(got, want) {
		t.Fatalf("conflicts by purpose %v, want %v", got, want)
	}
}

// readConflicts returns every committed kv.conflicts record.
func (s *stack) readConflicts(t *testing.T) []decide.Conflict {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.broker.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []decide.Conflict
	for p, end := range testenv.EndOffsets(ctx, t, cl, s.broker.Topics.Conflicts) {
		err := changelog.ReadCommitted(ctx, cl, changelog.Range{Topic: s.broker.Topics.Conflicts, Partition: p, From: 0, End: end}, func(r *kgo.Record) error {
			var c decide.Conflict
			if err := json.Unmarshal(r.Value, &c); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
