package audit

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/elemkey"
)

// TestElementRow: a set change's row holds the member's value hash (of
// the member as a JSON string, under the set's key), and its chain input
// names element_op and element_hash; another event's has neither member,
// so it hashes as before.
func TestElementRow(t *testing.T) {
	const key = "tenant/t/project/p/set"
	e := &contract.Event{SchemaVersion: 1, Key: key, Scope: "tenant/t/project/p", Version: 2, PrevVersion: 1,
		Kind: contract.KindPut, Op: contract.OpSAdd, Before: json.RawMessage(`{"type":"set","size":1,"since":1}`),
		After: json.RawMessage(`{"type":"set","size":2,"since":1}`), Semantics: contract.Semantics{Purpose: "set"},
		TS: time.Unix(1700000000, 0), Element: &contract.Element{Op: contract.ElementAdd, Member: "agent \"7\""}}
	r := EventRow(e, At{Partition: 0, Offset: 1}, testKey(), CurrentScheme, "")
	if want := CurrentScheme.ValueHash(testKey(), key, []byte(`"agent \"7\""`)); r.ElementOp != "add" || r.ElementHash != want {
		t.Fatalf("element %q %q, want add %q", r.ElementOp, r.ElementHash, want)
	}
	if in := string(ChainInput(&r)); !strings.Contains(in, `"element_hash":"`+r.ElementHash+`","element_op":"add"`) {
		t.Fatalf("chain input %s", in)
	}
	e.Element = nil
	r = EventRow(e, At{Partition: 0, Offset: 1}, testKey(), CurrentScheme, "")
	if in := string(ChainInput(&r)); strings.Contains(in, "element") {
		t.Fatalf("chain input of another event names the element: %s", in)
	}
	// The fast canonical form equals the definition, with and without.
	for _, el := range []string{"", "remove"} {
		r.ElementOp, r.ElementHash = el, map[string]string{"": "", "remove": "abc"}[el]
		fast, ok := r.chainInput().appendCanonical(nil)
		if slow := r.chainInput().canonicalSlow(); !ok || string(fast) != string(slow) {
			t.Fatalf("fast %s\nslow %s", fast, slow)
		}
	}
}

// TestListElementRow: a list push's (and pop's) row holds the value's
// hash, as a value is hashed, not the position's; a trim has no element.
func TestListElementRow(t *testing.T) {
	const key = "tenant/t/project/p/log"
	value := json.RawMessage(`{"msg":"User login at 12:00"}`)
	e := &contract.Event{SchemaVersion: 1, Key: key, Scope: "tenant/t/project/p", Version: 2, PrevVersion: 1,
		Kind: contract.KindPut, Op: contract.OpLPush, Before: json.RawMessage(`{"type":"list","size":1,"since":1}`),
		After: json.RawMessage(`{"type":"list","size":2,"since":1,"head":-1}`), Semantics: contract.Semantics{Purpose: "list"},
		TS: time.Unix(1700000000, 0), Element: &contract.Element{Op: contract.ElementAdd, Member: elemkey.ListPosition(-1), Value: value}}
	r := EventRow(e, At{Partition: 0, Offset: 1}, testKey(), CurrentScheme, "")
	if want := CurrentScheme.ValueHash(testKey(), key, value); r.ElementOp != "add" || r.ElementHash != want {
		t.Fatalf("element %q %q, want add %q", r.ElementOp, r.ElementHash, want)
	}
	if strings.Contains(string(ChainInput(&r)), "User login") {
		t.Fatal("the chain input holds the raw value")
	}
	e.Op, e.Element = contract.OpLTrim, nil
	if r := EventRow(e, At{Partition: 0, Offset: 1}, testKey(), CurrentScheme, ""); r.ElementOp != "" || r.ElementHash != "" {
		t.Fatalf("trim row names an element: %+v", r)
	}
}

// TestQueueElementRow: a queue event's row hashes the item's data (never
// its id) and names the state the item enters, remove when its row is
// deleted.
func TestQueueElementRow(t *testing.T) {
	const key = "tenant/t/project/p/tasks"
	data := json.RawMessage(`{"task":"process-image","id":123}`)
	e := &contract.Event{SchemaVersion: 1, Key: key, Scope: "tenant/t/project/p", Version: 3, PrevVersion: 2,
		Kind: contract.KindPut, Op: contract.OpQPop, After: json.RawMessage(`{"type":"queue","size":1,"since":1,"inFlight":1}`),
		Semantics: contract.Semantics{Purpose: "queue"}, TS: time.Unix(1700000000, 0),
		Element: &contract.Element{Op: contract.ElementAdd, Member: elemkey.QueueMember(1, 0, 2), Value: data, State: decide.ItemInFlight, Deliveries: 1}}
	for _, tc := range []struct {
		op    contract.Op
		state string
		want  string
	}{
		{contract.OpQPush, decide.ItemReady, "ready"},
		{contract.OpQPop, decide.ItemInFlight, "inflight"},
		{contract.OpQRequeue, decide.ItemReady, "ready"},
		{contract.OpQAck, decide.ItemDone, "done"},
		{contract.OpQAck, "", "remove"},
		{contract.OpQExpire, "", "remove"},
		{contract.OpQExpire, decide.ItemDone, "done"},
	} {
		e.Op, e.Element.State, e.Element.Op = tc.op, tc.state, contract.ElementAdd
		if tc.state == "" {
			e.Element.Op = contract.ElementRemove
		}
		r := EventRow(e, At{Partition: 0, Offset: 1}, testKey(), CurrentScheme, "")
		if want := CurrentScheme.ValueHash(testKey(), key, data); r.ElementOp != tc.want || r.ElementHash != want {
			t.Fatalf("%s %s: element %q %q, want %q %q", tc.op, tc.state, r.ElementOp, r.ElementHash, tc.want, want)
		}
		if strings.Contains(string(ChainInput(&r)), "process-image") {
			t.Fatal("the chain input holds the raw data")
		}
	}
}
