package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eskv/eskv/events"
)

// Write-only principals: a token that may write a key but not read it
// cannot acknowledge a delivery it was not handed by guessing its
// receipt.

// TestQueueReceiptsAreUnguessable: the attack of issue P1 #10 acked
// another consumer's in-flight item with <item>#1, the item id a push
// answers. A receipt carries 128 random bits: a guessed one is refused
// with the same stale_receipt message as any other stale receipt, which
// describes no delivery, and the consumer's own receipt still acks.
func TestQueueReceiptsAreUnguessable(t *testing.T) {
	s := mustStack(t)
	q := secBase + "probe-queue"
	pop := func() events.QPopAnswer {
		t.Helper()
		var a events.QPopAnswer
		r := s.do("POST", q+":qpop", acmeToken, `{"visibilityTimeoutSeconds":300}`)
		if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil {
			t.Fatalf("pop: %d %s", r.Status, r.Body)
		}
		return a
	}
	var pushed events.QPushAnswer
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
		events.QueueMember(1, 0, 1) + "#1", // no such item
	} {
		r := s.do("POST", q+":qack", writerTok, `{"receipt":"`+guess+`"}`)
		expect(t, "ack of "+guess, r, 409, events.EStaleReceipt, "receipt")
		messages = append(messages, r.errorBody(t).Message)
	}
	for _, a := range []events.QPopAnswer{first, second} {
		item, n, nonce, err := events.ParseReceipt(a.Receipt)
		if err != nil || item != a.Item || n != 1 || len(nonce) != 32 || a.Receipt == a.Item+"#1" {
			t.Fatalf("receipt %q of %s: want %s#1#<32 hex digits>", a.Receipt, a.Item, a.Item)
		}
	}
	if _, _, n1, _ := events.ParseReceipt(first.Receipt); strings.Contains(second.Receipt, n1) {
		t.Fatalf("two deliveries share a receipt's random part: %s %s", first.Receipt, second.Receipt)
	}
	expect(t, "own ack", s.do("POST", q+":qack", acmeToken, `{"receipt":"`+first.Receipt+`"}`), 200, "", "")
	r := s.do("POST", q+":qack", writerTok, `{"receipt":"`+first.Receipt+`"}`)
	expect(t, "ack of an acked receipt", r, 409, events.EStaleReceipt, "receipt")
	messages = append(messages, r.errorBody(t).Message)
	t.Logf("guessed receipts refused: %d; stale_receipt message: %q", len(messages)-1, messages[0])
	for _, m := range messages {
		if m != messages[0] || strings.Contains(m, "deliver") && strings.ContainsAny(m, "0123456789") {
			t.Fatalf("stale_receipt messages differ or describe a delivery: %q", messages)
		}
	}
	expect(t, "the consumer's own receipt", s.do("POST", q+":qack", writerTok, `{"receipt":"`+second.Receipt+`"}`), 200, "", "")

}
