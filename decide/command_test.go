package decide

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/elemkey"
	"github.com/eskv/eskv/projection/keystate"
)

// fixture is a write as the tests here spell it: any op family's fields
// in one struct, which commandOf splits into the command of its family.
// The rules never read it: it only keeps the tables of these tests
// short.
type fixture struct {
	Key                                     contract.Key
	Op                                      contract.Op
	RequestID, Principal                    string
	Blind, Denied, Queued                   bool
	Value                                   json.RawMessage
	ExpectedVersion                         *int64
	TTLSeconds                              int64
	KeepTTL                                 bool
	Semantics                               contract.Semantics
	SpecRef                                 string
	By                                      int64
	Create                                  bool
	Min, Max                                *int64
	Set                                     map[string]json.RawMessage
	Unset                                   []string
	If                                      *contract.FieldCondition
	MaxValueBytes                           int
	Holder, Member                          string
	Start, Stop                             int64
	Priority, Visibility, Delivery, ItemTTL int64
	DedupID, Item, ReceiptNonce             string
	Txn                                     []fixtureStep
}

// fixtureStep is a transaction's step as a fixture: a KV write and its
// condition.
type fixtureStep struct {
	Req  *fixture
	Cond *contract.Condition
}

// head is r's header.
func (r *fixture) head() *Header { return commandOf(r).Head() }

// Digest is the digest of r's command.
func (r *fixture) Digest() string {
	return commandOf(r).(interface{ digest() string }).digest()
}

// commonOf is what the rules every single-key family shares read of r's
// command.
func commonOf(r *fixture) common {
	return commandOf(r).(interface{ common() common }).common()
}

// commandOf is the command of r's op family, r split into its family's
// fields.
func commandOf(r *fixture) Command {
	h := Header{Key: r.Key, Op: r.Op, RequestID: r.RequestID, Principal: r.Principal, Blind: r.Blind}
	switch {
	case r.Txn != nil:
		steps := make([]TxnStep, len(r.Txn))
		for i, s := range r.Txn {
			steps[i] = TxnStep{Write: commandOf(s.Req).(*KV), Cond: s.Cond}
		}
		return &Txn{Header: h, Steps: steps}
	case r.Member != "" && !r.Denied:
		return &Set{Header: h, ExpectedVersion: r.ExpectedVersion, Member: r.Member, TTLSeconds: r.TTLSeconds}
	case r.Denied:
		return kvOf(h, r)
	case r.Op.IsQueueWrite():
		return queueOf(r)
	case isListWrite(r.Op):
		return &List{Header: h, ExpectedVersion: r.ExpectedVersion, Value: r.Value, TTLSeconds: r.TTLSeconds, Start: r.Start, Stop: r.Stop}
	case r.Op.LockAction() != "":
		return &Lock{Header: h, Holder: r.Holder, TTLSeconds: r.TTLSeconds, Semantics: r.Semantics, SpecRef: r.SpecRef, Queued: r.Queued}
	}
	return kvOf(h, r)
}

// kvOf is the KV command of r.
func kvOf(h Header, r *fixture) *KV {
	return &KV{Header: h, Value: r.Value, ExpectedVersion: r.ExpectedVersion, TTLSeconds: r.TTLSeconds, KeepTTL: r.KeepTTL,
		Semantics: r.Semantics, SpecRef: r.SpecRef, By: r.By, Create: r.Create, Min: r.Min, Max: r.Max,
		Set: r.Set, Unset: r.Unset, If: r.If, MaxValueBytes: r.MaxValueBytes, Denied: r.Denied}
}

// queueOf is the Queue command of r.
func queueOf(r *fixture) *Queue {
	return &Queue{Header: Header{Key: r.Key, Op: r.Op, RequestID: r.RequestID, Principal: r.Principal, Blind: r.Blind},
		ExpectedVersion: r.ExpectedVersion, Value: r.Value, TTLSeconds: r.TTLSeconds, Priority: r.Priority,
		DedupID: r.DedupID, ItemTTL: r.ItemTTL, Visibility: r.Visibility, Item: r.Item, Delivery: r.Delivery,
		ReceiptNonce: r.ReceiptNonce}
}

// TestCommandOf: each request is decided by its op family's command, and
// each command plans the reads its family's decision takes.
func TestCommandOf(t *testing.T) {
	key := mustKey(t, "tenant/a/project/b/k")
	other := mustKey(t, "tenant/a/project/b/j")
	k := key.String()
	txn := &fixture{Key: key, Op: contract.OpTxn, RequestID: "t", Txn: []fixtureStep{
		{Req: &fixture{Key: key, Op: contract.OpPut}},
		{Req: &fixture{Key: other, Op: contract.OpCheck}},
	}}
	for _, tc := range []struct {
		name string
		r    *fixture
		want Command
		plan Plan
	}{
		{"Put", &fixture{Key: key, Op: contract.OpPut, RequestID: "r"}, &KV{}, Plan{Keys: []string{k}, Requests: []RequestRef{{k, "r"}}}},
		{"ExpireRecallsNothing", &fixture{Key: key, Op: contract.OpExpire, RequestID: "r"}, &KV{}, Plan{Keys: []string{k}}},
		{"Lock", &fixture{Key: key, Op: contract.OpLockAcquire}, &Lock{}, Plan{Keys: []string{k}}},
		{"Queue", &fixture{Key: key, Op: contract.OpQPop}, &Queue{}, Plan{Keys: []string{k}}},
		{"List", &fixture{Key: key, Op: contract.OpRPush}, &List{}, Plan{Keys: []string{k}}},
		{"Set", &fixture{Key: key, Op: contract.OpSAdd, Member: "m"}, &Set{}, Plan{Keys: []string{k}, Elements: []ElementRef{{k, "m"}}}},
		{"DeniedSetIsKV", &fixture{Key: key, Op: contract.OpSAdd, Member: "m", Denied: true, RequestID: "r"}, &KV{}, Plan{Keys: []string{k}}},
		{"DeniedListIsKV", &fixture{Key: key, Op: contract.OpLPop, Denied: true}, &KV{}, Plan{Keys: []string{k}}},
		{"Txn", txn, &Txn{}, Plan{Keys: []string{k, other.String()}, Requests: []RequestRef{{k, "t"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := commandOf(tc.r)
			if reflect.TypeOf(c) != reflect.TypeOf(tc.want) || c.Head().Key != tc.r.Key || c.Head().Op != tc.r.Op || c.Head().RequestID != tc.r.RequestID {
				t.Fatalf("command %T of %s, want %T", c, tc.r.Op, tc.want)
			}
			var p Plan
			c.Plan(&p)
			if !reflect.DeepEqual(p, tc.plan) {
				t.Fatalf("plan %+v, want %+v", p, tc.plan)
			}
		})
	}
}

// TestCommandRow: a set decides on its member's row whatever the state;
// a list pop on the row at the end the state names, nothing when empty.
func TestCommandRow(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/l")
	list := keystate.State{Version: 5, Live: true, Entry: contract.Entry{Key: key.String(), Version: 5,
		Value: []byte(`{"type":"list","size":3,"since":1,"head":10}`), Semantics: contract.Semantics{Purpose: "list"}}}
	if ref, ok := commandOf(&fixture{Key: key, Op: contract.OpRPop}).Row(list, now); !ok || ref != (ElementRef{key.String(), elemkey.ListPosition(12)}) {
		t.Fatalf("rpop row %v %v, want position 12", ref, ok)
	}
	if _, ok := commandOf(&fixture{Key: key, Op: contract.OpLPop}).Row(keystate.State{}, now); ok {
		t.Fatal("a pop of a missing list names a row")
	}
	if _, ok := commandOf(&fixture{Key: key, Op: contract.OpRPush}).Row(list, now); ok {
		t.Fatal("a push names a row")
	}
	if ref, ok := commandOf(&fixture{Key: key, Op: contract.OpSRem, Member: "m"}).Row(keystate.State{}, now); !ok || ref.Member != "m" {
		t.Fatalf("srem row %v %v, want member m", ref, ok)
	}
}

// setOf is the Set command of r.
func setOf(r *fixture) *Set { return commandOf(r).(*Set) }

// listOf is the List command of r.
func listOf(r *fixture) *List { return commandOf(r).(*List) }

// decideOn is the decision of r's command on its key's state cur, with
// nothing known of its requestId but what cur says.
func decideOn(cur keystate.State, r *fixture, env Env) Decision {
	return commandOf(r).Decide(Input{State: cur}, env)
}

// txnOf is the Txn command of r.
func txnOf(r *fixture) *Txn { return commandOf(r).(*Txn) }

// isListWrite reports whether op is a list write (push, pop or trim).
func isListWrite(op contract.Op) bool {
	return op == contract.OpLPush || op == contract.OpRPush || op == contract.OpLPop || op == contract.OpRPop || op == contract.OpLTrim
}
