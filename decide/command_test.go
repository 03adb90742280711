package decide

import (
	"reflect"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/elemkey"
)

// TestCommandOf: each request is decided by its op family's command, and
// each command plans the reads its family's decision takes.
func TestCommandOf(t *testing.T) {
	key := mustKey(t, "tenant/a/project/b/k")
	other := mustKey(t, "tenant/a/project/b/j")
	k := key.String()
	txn := &Request{Key: key, Op: contract.OpTxn, RequestID: "t", Txn: []TxnStep{
		{Req: &Request{Key: key, Op: contract.OpPut}},
		{Req: &Request{Key: other, Op: contract.OpCheck}},
	}}
	for _, tc := range []struct {
		name string
		r    *Request
		want Command
		plan Plan
	}{
		{"Put", &Request{Key: key, Op: contract.OpPut, RequestID: "r"}, KV{}, Plan{Keys: []string{k}, Requests: []RequestRef{{k, "r"}}}},
		{"ExpireRecallsNothing", &Request{Key: key, Op: contract.OpExpire, RequestID: "r"}, KV{}, Plan{Keys: []string{k}}},
		{"Lock", &Request{Key: key, Op: contract.OpLockAcquire}, Lock{}, Plan{Keys: []string{k}}},
		{"Queue", &Request{Key: key, Op: contract.OpQPop}, Queue{}, Plan{Keys: []string{k}}},
		{"List", &Request{Key: key, Op: contract.OpRPush}, List{}, Plan{Keys: []string{k}}},
		{"Set", &Request{Key: key, Op: contract.OpSAdd, Member: "m"}, Set{}, Plan{Keys: []string{k}, Elements: []ElementRef{{k, "m"}}}},
		{"DeniedSetIsKV", &Request{Key: key, Op: contract.OpSAdd, Member: "m", Denied: true, RequestID: "r"}, KV{}, Plan{Keys: []string{k}}},
		{"DeniedListIsKV", &Request{Key: key, Op: contract.OpLPop, Denied: true}, KV{}, Plan{Keys: []string{k}}},
		{"Txn", txn, Txn{}, Plan{Keys: []string{k, other.String()}, Requests: []RequestRef{{k, "t"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := CommandOf(tc.r)
			if reflect.TypeOf(c) != reflect.TypeOf(tc.want) || c.Request() != tc.r {
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
	list := contract.State{Version: 5, Live: true, Entry: contract.Entry{Key: key.String(), Version: 5,
		Value: []byte(`{"type":"list","size":3,"since":1,"head":10}`), Semantics: contract.Semantics{Purpose: "list"}}}
	if ref, ok := CommandOf(&Request{Key: key, Op: contract.OpRPop}).Row(list, now); !ok || ref != (ElementRef{key.String(), elemkey.ListPosition(12)}) {
		t.Fatalf("rpop row %v %v, want position 12", ref, ok)
	}
	if _, ok := CommandOf(&Request{Key: key, Op: contract.OpLPop}).Row(contract.State{}, now); ok {
		t.Fatal("a pop of a missing list names a row")
	}
	if _, ok := CommandOf(&Request{Key: key, Op: contract.OpRPush}).Row(list, now); ok {
		t.Fatal("a push names a row")
	}
	if ref, ok := CommandOf(&Request{Key: key, Op: contract.OpSRem, Member: "m"}).Row(contract.State{}, now); !ok || ref.Member != "m" {
		t.Fatalf("srem row %v %v, want member m", ref, ok)
	}
}
