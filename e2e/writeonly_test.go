package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/elemkey"
)

// Write-only principals (README "Security", "What a write-only token
// learns"): a token that may write a key but not read it learns no more
// than whether its own write succeeded, and never a value: not through a
// counter's bounds, a field condition, a set's version or a guessed queue
// receipt.

// TestWriteOnlyCannotProbeCounter: the attack of issue P1 #5 learned a
// counter's exact value in 63 increments with max (each undone). Every
// condition on the value is refused to a principal without read (403
// naming it) before the writer decides anything, and so is an addend
// large enough to probe the 64-bit bound.
func TestWriteOnlyCannotProbeCounter(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	k := secBase + "probe-counter"
	const secret = 918273645
	expect(t, "set counter", s.do("POST", k+":increment", acmeToken, fmt.Sprintf(`{"by":%d,"create":true}`, secret)), 200, "", "")

	// The binary search of the attack: max = mid is refused when the
	// counter exceeds mid; an accepted probe is undone.
	lo, hi, probes, refused := int64(0), int64(math.MaxInt32), 0, 0
	for lo < hi && probes < 63 {
		mid := lo + (hi-lo)/2
		probes++
		r := s.do("POST", k+":increment", writerTok, fmt.Sprintf(`{"by":1,"max":%d}`, mid+1))
		switch r.Status {
		case 200:
			hi = mid
			expect(t, "undo", s.do("POST", k+":increment", writerTok, `{"by":-1}`), 200, "", "")
		case 409:
			lo = mid + 1
		default:
			expect(t, "probe with max", r, 403, contract.EForbidden, "max")
			refused++
			lo, hi = 0, 0 // nothing learned: stop
		}
	}
	t.Logf("write-only probes of a counter through max: %d sent, %d refused (403 field max), value learned: %v", probes, refused, refused == 0 && lo == secret)
	if refused != 1 || probes != 1 {
		t.Fatalf("the probe with max was answered: %d probes, the attack found %d (secret %d)", probes, lo, secret)
	}
	for _, tc := range []struct{ name, body, field string }{
		{"Min", `{"by":-1,"min":0}`, "min"},
		{"MinAndMax", `{"by":1,"min":0,"max":10}`, "min"},
		{"ByBeyondBlindStep", fmt.Sprintf(`{"by":%d}`, int64(math.MaxInt64)-secret), "by"},
		{"NegativeByBeyondBlindStep", fmt.Sprintf(`{"by":%d}`, -(decide.MaxBlindStep + 1)), "by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expect(t, "increment", s.do("POST", k+":increment", writerTok, tc.body), 403, contract.EForbidden, tc.field)
		})
	}
	expect(t, "by at the blind step", s.do("POST", k+":increment", writerTok, fmt.Sprintf(`{"by":%d}`, decide.MaxBlindStep)), 200, "", "")
	expect(t, "reader's bound", s.do("POST", k+":increment", acmeToken, `{"by":1,"max":1}`), 409, contract.EOutOfRange, "max")
}

// TestWriteOnlyCannotTestFields: a PATCH's if and a transaction's field
// condition would confirm a guessed field value (field_mismatch or
// success): refused to a principal without read, naming the parameter;
// version and existence conditions stay (a version is no value).
func TestWriteOnlyCannotTestFields(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	k := secBase + "probe-fields"
	const secret = "sk-live-SECRET123"
	expect(t, "put", s.do("PUT", k, acmeToken, `{"value":{"api":"`+secret+`","n":1}}`), 200, "", "")
	key := strings.TrimPrefix(k, "/v1/kv/")
	for _, tc := range []struct{ name, method, path, body, field string }{
		{"PatchIfRight", "PATCH", k, `{"set":{"b":1},"if":{"field":"api","equals":"` + secret + `"}}`, "if"},
		{"PatchIfWrong", "PATCH", k, `{"set":{"b":1},"if":{"field":"api","equals":"guess"}}`, "if"},
		{"TxnFieldCondition", "POST", "/v1/txn", `{"ops":[{"op":"patch","key":"` + key + `","set":{"b":1},"condition":{"field":"api","equals":"guess"}}]}`, "ops[0].condition.field"},
		{"TxnPutFieldCondition", "POST", "/v1/txn", `{"ops":[{"op":"put","key":"` + key + `","value":1,"condition":{"field":"api","equals":"guess"}}]}`, "ops[0].condition.field"},
		{"TxnIncrementMax", "POST", "/v1/txn", `{"ops":[{"op":"increment","key":"` + key + `x","create":true,"max":5}]}`, "ops[0].max"},
		{"TxnCheck", "POST", "/v1/txn", `{"ops":[{"op":"check","key":"` + key + `","condition":{"field":"api","equals":"guess"}}]}`, "ops[0].key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(tc.method, tc.path, writerTok, tc.body)
			expect(t, tc.name, r, 403, contract.EForbidden, tc.field)
			if strings.Contains(string(r.Body), secret) {
				t.Fatalf("the refusal names the value: %s", r.Body)
			}
		})
	}
	got := getJSON(t, s, k, acmeToken)
	if got["b"] != nil {
		t.Fatalf("a refused patch wrote: %v", got)
	}
	expect(t, "txn version condition", s.do("POST", "/v1/txn", writerTok, `{"ops":[{"op":"patch","key":"`+key+`","set":{"b":1},"condition":{"version":1}}]}`), 200, "", "")
	expect(t, "reader's if", s.do("PATCH", k, acmeToken, `{"set":{"c":1},"if":{"field":"api","equals":"guess"}}`), 409, contract.EFieldMismatch, "if.equals")
}

// getJSON reads key k's value as an object.
func getJSON(t *testing.T, s *stack, k, token string) map[string]any {
	t.Helper()
	r := s.do("GET", k, token, nil)
	var e struct {
		Value map[string]any `json:"value"`
	}
	if r.Status != 200 || json.Unmarshal(r.Body, &e) != nil {
		t.Fatalf("get %s: %d %s", k, r.Status, r.Body)
	}
	return e.Value
}

// setChange is an sadd or srem answer.
type setChange struct {
	Version int64           `json:"version"`
	Added   json.RawMessage `json:"added"`
	Removed json.RawMessage `json:"removed"`
	Size    json.RawMessage `json:"size"`
}

// TestWriteOnlySetWritesTellNoMembership: an sadd of a member already
// there appends nothing for a reader, so its version used to tell a
// write-only principal the member was there. A write-only sadd or srem
// moves the set's version by exactly one whatever the set holds, and
// answers neither added nor removed, and size 0.
func TestWriteOnlySetWritesTellNoMembership(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	k := secBase + "probe-set"
	expect(t, "reader adds", s.do("POST", k+":sadd", acmeToken, `{"member":"alice@example.com"}`), 200, "", "")
	change := func(op, member string) setChange {
		t.Helper()
		r := s.do("POST", k+":"+op, writerTok, `{"member":"`+member+`"}`)
		var a setChange
		if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil {
			t.Fatalf("%s %s: %d %s", op, member, r.Status, r.Body)
		}
		if a.Added != nil || a.Removed != nil || string(a.Size) != "0" {
			t.Fatalf("%s %s: a write-only answer tells membership or size: %s", op, member, r.Body)
		}
		return a
	}
	prev := change("sadd", "nonce-1").Version
	var deltas []int64
	for _, p := range []struct{ op, member string }{
		{"sadd", "alice@example.com"}, // a member
		{"sadd", "bob@example.com"},   // not a member
		{"srem", "carol@example.com"}, // not a member
		{"srem", "nonce-1"},           // a member
		{"sadd", "alice@example.com"}, // a member
	} {
		v := change(p.op, p.member).Version
		deltas = append(deltas, v-prev)
		prev = v
	}
	t.Logf("write-only set writes (member, non-member, non-member, member, member): version deltas %v", deltas)
	for i, d := range deltas {
		if d != 1 {
			t.Fatalf("write %d moved the version by %d: the version tells membership (%v)", i, d, deltas)
		}
	}
	r := s.do("GET", k+":sismember?member=bob@example.com", acmeToken, nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"isMember":true`) {
		t.Fatalf("the write-only sadd of a new member must add it: %d %s", r.Status, r.Body)
	}
	r = s.do("GET", k+":scard", acmeToken, nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"size":2`) {
		t.Fatalf("scard after the write-only writes: %d %s, want 2 (alice, bob)", r.Status, r.Body)
	}
}

// TestQueueReceiptsAreUnguessable: the attack of issue P1 #10 acked
// another consumer's in-flight item with <item>#1, the item id a push
// answers. A receipt carries 128 random bits: a guessed one is refused
// with the same stale_receipt message as any other stale receipt, which
// describes no delivery, and the consumer's own receipt still acks.
func TestQueueReceiptsAreUnguessable(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	q := secBase + "probe-queue"
	pop := func() contract.QPopAnswer {
		t.Helper()
		var a contract.QPopAnswer
		r := s.do("POST", q+":qpop", acmeToken, `{"visibilityTimeoutSeconds":300}`)
		if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil {
			t.Fatalf("pop: %d %s", r.Status, r.Body)
		}
		return a
	}
	var pushed contract.QPushAnswer
	for _, d := range []string{`"job-1"`, `"job-2"`} {
		r := s.do("POST", q+":qpush", writerTok, `{"data":`+d+`}`)
		if r.Status != 200 || json.Unmarshal(r.Body, &pushed) != nil {
			t.Fatalf("push: %d %s", r.Status, r.Body)
		}
	}
	first, second := pop(), pop()
	var messages []string
	for _, guess := range []string{
		second.Item + "#1", // the attack: the item id a push answered, delivery 1
		second.Item + "#1#" + strings.Repeat("0", 32),
		second.Item + "#2",
		elemkey.QueueMember(1, 0, 1) + "#1", // no such item
	} {
		r := s.do("POST", q+":qack", writerTok, `{"receipt":"`+guess+`"}`)
		expect(t, "ack of "+guess, r, 409, contract.EStaleReceipt, "receipt")
		messages = append(messages, r.errorBody(t).Message)
	}
	for _, a := range []contract.QPopAnswer{first, second} {
		item, n, nonce, err := contract.ParseReceipt(a.Receipt)
		if err != nil || item != a.Item || n != 1 || len(nonce) != 32 || a.Receipt == a.Item+"#1" {
			t.Fatalf("receipt %q of %s: want %s#1#<32 hex digits>", a.Receipt, a.Item, a.Item)
		}
	}
	if _, _, n1, _ := contract.ParseReceipt(first.Receipt); strings.Contains(second.Receipt, n1) {
		t.Fatalf("two deliveries share a receipt's random part: %s %s", first.Receipt, second.Receipt)
	}
	expect(t, "own ack", s.do("POST", q+":qack", acmeToken, `{"receipt":"`+first.Receipt+`"}`), 200, "", "")
	r := s.do("POST", q+":qack", writerTok, `{"receipt":"`+first.Receipt+`"}`)
	expect(t, "ack of an acked receipt", r, 409, contract.EStaleReceipt, "receipt")
	messages = append(messages, r.errorBody(t).Message)
	t.Logf("guessed receipts refused: %d; stale_receipt message: %q", len(messages)-1, messages[0])
	for _, m := range messages {
		if m != messages[0] || strings.Contains(m, "deliver") && strings.ContainsAny(m, "0123456789") {
			t.Fatalf("stale_receipt messages differ or describe a delivery: %q", messages)
		}
	}
	expect(t, "the consumer's own receipt", s.do("POST", q+":qack", writerTok, `{"receipt":"`+second.Receipt+`"}`), 200, "", "")

	// A deduplicated push tells a write-only principal that its push
	// added nothing, not the earlier push's item or priority.
	expect(t, "reader's push", s.do("POST", q+":qpush", acmeToken, `{"data":"order","dedupId":"order-7","priority":3}`), 200, "", "")
	r = s.do("POST", q+":qpush", writerTok, `{"data":"order","dedupId":"order-7"}`)
	var dup map[string]any
	if r.Status != 200 || json.Unmarshal(r.Body, &dup) != nil || dup["deduplicated"] != true || dup["item"] != nil || dup["priority"] != 0.0 {
		t.Fatalf("write-only deduplicated push: %d %s, want deduplicated without the item", r.Status, r.Body)
	}
}
