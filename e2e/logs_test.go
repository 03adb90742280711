package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// TestNoValueInLogs runs writes, conflicts of every kind, an expiry and
// rejected requests whose values hold a recognisable secret, and searches
// the logs of the whole in-process stack (writer, sweeper, projector,
// HTTP API, Kafka client; level debug) for it: no value, ever, in logs.
func TestNoValueInLogs(t *testing.T) {
	t.Parallel()
	var logs testenv.Buffer
	s := mustStack(t, inproc.Logs(&logs))
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	secret := "sk-live-" + hex.EncodeToString(rnd[:])
	k, obj, counter, lock := base+"logs/plain", base+"logs/obj", base+"logs/counter", base+"logs/lock"
	for _, step := range []struct {
		method, path, body string
		status             int
	}{
		{"PUT", k, `{"value":"` + secret + `","requestId":"r1"}`, 200},
		{"PUT", k, `{"value":"` + secret + `-attempt","expectedVersion":7}`, 409}, // version_conflict
		{"PUT", k, `{"value":"` + secret + `-other","requestId":"r1"}`, 409},      // a reused requestId
		{"PUT", obj, `{"value":{"token":"` + secret + `"},"semantics":{"purpose":"config"}}`, 200},
		{"PATCH", obj, `{"set":{"a":"` + secret + `"},"if":{"field":"token","equals":"x"}}`, 409}, // field_mismatch
		{"PATCH", obj, `{"set":{"b":"` + secret + `"}}`, 200},
		{"PATCH", k, `{"set":{"a":1}}`, 409},                               // wrong_type: a string
		{"POST", k + ":increment", `{}`, 409},                              // wrong_type: not a counter
		{"POST", k + ":acquire", `{"holder":"h"}`, 409},                    // wrong_type: not a lock
		{"GET", k + "?field=a", "", 409},                                   // wrong_type on a read
		{"POST", counter + ":increment", `{"create":true}`, 200},           // a counter beside them
		{"POST", lock + ":acquire", `{"holder":"h","ttlSeconds":60}`, 200}, // and a lock
		{"PUT", k, `{"value":{"s":"` + secret + `","s":1}}`, 400},          // rejected: a duplicate member
		{"PUT", k, `{"value":"` + secret + `","extra":1}`, 400},            // rejected: an unknown field
		{"PUT", k, `{"value":"` + secret + `",}`, 400},                     // rejected: not JSON
		{"PUT", k, `{"value":"` + secret + `","ttlSeconds":0}`, 400},       // rejected: a bad TTL
		{"GET", "/v1/kv?prefix=" + scope + "logs/&field=token&op=eq&value=" + secret, "", 200},
		{"PUT", base + "logs/ttl", `{"value":"` + secret + `-expiring","ttlSeconds":1}`, 200},
		// Sets: members are values too.
		{"POST", base + "logs/set:sadd", `{"member":"` + secret + `","requestId":"s1"}`, 200},
		{"POST", base + "logs/set:sadd", `{"member":"` + secret + `"}`, 200}, // already there
		{"GET", base + "logs/set:sismember?member=" + secret, "", 200},
		{"GET", base + "logs/set:smembers", "", 200},
		{"POST", base + "logs/set:srem", `{"member":"` + secret + `","expectedVersion":9}`, 409}, // version_conflict
		{"POST", base + "logs/set:srem", `{"member":"` + secret + `"}`, 200},
		{"POST", k + ":sadd", `{"member":"` + secret + `"}`, 409},                       // wrong_type: not a set
		{"POST", base + "logs/set:sadd", `{"member":"` + secret + "\u0000" + `"}`, 400}, // rejected: NUL
		// Lists: values pushed and popped are values.
		{"POST", base + "logs/list:rpush", `{"value":"` + secret + `","requestId":"l1"}`, 200},
		{"POST", base + "logs/list:lpush", `{"value":{"token":"` + secret + `"}}`, 200},
		{"GET", base + "logs/list:lrange?start=0&stop=-1", "", 200},
		{"POST", base + "logs/list:rpop", `{"expectedVersion":9}`, 409}, // version_conflict
		{"POST", base + "logs/list:rpop", ``, 200},
		{"POST", base + "logs/list:ltrim", `{"start":1,"stop":0}`, 200},
		{"POST", base + "logs/list:lpop", ``, 404},                             // empty
		{"POST", k + ":lpush", `{"value":"` + secret + `"}`, 409},              // wrong_type: not a list
		{"POST", base + "logs/list:rpush", `{"value":"` + secret + `",}`, 400}, // rejected: not JSON
		// Transactions: applied, rejected by a field condition, refused.
		{"POST", "/v1/txn", `{"ops":[{"op":"put","key":"` + scope + `logs/txn","value":"` + secret + `"}]}`, 200},
		{"POST", "/v1/txn", `{"ops":[{"op":"put","key":"` + scope + `logs/txn2","value":"` + secret + `"},{"op":"check","key":"` +
			scope + `logs/obj","condition":{"field":"token","equals":"` + secret + `-no"}}]}`, 409},
		{"POST", "/v1/txn", `{"ops":[{"op":"put","key":"` + scope + `logs/txn3","value":"` + secret + `","by":1}]}`, 400},
		{"DELETE", k, "", 200},
	} {
		var body any
		if step.body != "" {
			body = step.body
		}
		if r := s.do(step.method, step.path, devToken, body); r.Status != step.status {
			t.Fatalf("%s %s %s: %d %s", step.method, step.path, step.body, r.Status, r.Body)
		}
	}
	ttl := strings.TrimPrefix(base, "/v1/kv/") + "logs/ttl"
	testenv.WaitFor(t, 30*time.Second, "the expiry", func() bool {
		for _, e := range s.readLog(t.Context()) {
			if e.Key == ttl && e.Kind == contract.KindExpire {
				return true
			}
		}
		return false
	})
	waitProjected(t, s)
	got := logs.String()
	for _, want := range []string{`"msg":"expired"`, `"msg":"version conflict"`, `"msg":"write"`, `"msg":"transaction"`, `"msg":"transaction rejected"`} {
		if !strings.Contains(got, want) {
			t.Fatalf("the logs have no %s line: the test does not see what it should", want)
		}
	}
	for _, needle := range []string{secret, hex.EncodeToString([]byte(secret)), rnd2(secret)} {
		if i := strings.Index(got, needle); i >= 0 {
			line := got[strings.LastIndexByte(got[:i], '\n')+1:]
			line, _, _ = strings.Cut(line, "\n")
			t.Fatalf("a value reached the logs: %s", line)
		}
	}
}

// rnd2 is the secret's random part alone, as a value abbreviated or
// escaped differently would still show it.
func rnd2(secret string) string { return strings.TrimPrefix(secret, "sk-live-") }
