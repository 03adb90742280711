package decide

import (
	"encoding/json"
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestDigestPinned pins the digest of one command of every op, and of
// every optional part a digest appends: digests are stored with events
// (kv_history, the overlay), and a retried request must match the digest
// the code before it stored, or it would be applied twice (or refused
// as a reuse). A change of any of these strings breaks every stored
// requestId: never update them, fix the digest instead.
func TestDigestPinned(t *testing.T) {
	key := mustKey(t, "tenant/a/project/b/k")
	other := mustKey(t, "tenant/a/project/b/j")
	h := func(op contract.Op) Header { return Header{Key: key, Op: op, RequestID: "r-1", Principal: "p"} }
	sem := contract.Semantics{Purpose: "cursor", Producer: "sync", ConsumerHints: []string{"ui"}, TTLSeconds: 30}
	val := json.RawMessage(`{"a":1}`)
	eq := &contract.FieldCondition{Field: "s", Equals: json.RawMessage(`"open"`)}
	yes := true
	for _, tc := range []struct {
		name string
		c    interface{ digest() string }
		want string
	}{
		{"Put", &KV{Header: h(contract.OpPut), Value: val}, "843ddc38e547440857408120878c0b19"},
		{"PutFull", &KV{Header: h(contract.OpPut), Value: val, ExpectedVersion: ptr(3), TTLSeconds: 30, KeepTTL: true, Semantics: sem, SpecRef: "spec/1"}, "a2a5223be69b00713c54b25b6ee650d8"},
		{"PutCreate", &KV{Header: h(contract.OpPut), Value: val, ExpectedVersion: ptr(0)}, "9c870488536e0ab90e27267aeb56237a"},
		{"Delete", &KV{Header: h(contract.OpDelete), ExpectedVersion: ptr(2)}, "2d52eabdcbc09e8c63e0c8c7413231d2"},
		{"Expire", &KV{Header: Header{Key: key, Op: contract.OpExpire}, ExpectedVersion: ptr(4)}, "3ad7c5edb4e8cf5cc803eb4abf2aabd4"},
		{"Increment", &KV{Header: h(contract.OpIncrement), By: 1}, "30b56eebbe4a1b72e6cf86d4ca6eaf42"},
		{"IncrementFull", &KV{Header: h(contract.OpIncrement), By: -2, Create: true, Min: ptr(0), Max: ptr(10), TTLSeconds: 60, MaxValueBytes: 100}, "e8583a945fd55caa3ade76a687df108b"},
		{"IncrementMaxOnly", &KV{Header: h(contract.OpIncrement), By: 1, Max: ptr(10)}, "2f17735730f6f62c94194bec1a116bec"},
		{"Patch", &KV{Header: h(contract.OpPatch), Set: map[string]json.RawMessage{"b": json.RawMessage(`2`), "a": json.RawMessage(`1`)}, Unset: []string{"c"}}, "1c173db9b855d81b415fc3e64d0c71a9"},
		{"PatchIf", &KV{Header: h(contract.OpPatch), Set: map[string]json.RawMessage{"s": json.RawMessage(`"closed"`)}, If: eq, Create: true}, "be35f4fcf8d56f7c750eb9f7fc60efe0"},
		{"Check", &KV{Header: h(contract.OpCheck)}, "c65b879d6dc3ee71ce987d4a3d7e0f88"},
		{"DeniedPut", &KV{Header: h(contract.OpPut), Value: val, Denied: true}, "843ddc38e547440857408120878c0b19"},
		{"DeniedLTrim", &KV{Header: h(contract.OpLTrim), Denied: true}, "e5599350c94cb03e8d7bcf41b00422b2"},
		{"DeniedQPush", &KV{Header: h(contract.OpQPush), Denied: true}, "28c24092c556ebc27d03335bdc16d9a4"},
		{"DeniedLockAcquire", &KV{Header: h(contract.OpLockAcquire), Denied: true}, "51223ba95cff18d411c7f99e0d5b7b44"},
		{"LockAcquire", &Lock{Header: h(contract.OpLockAcquire), Holder: "a", TTLSeconds: 30}, "85eba80cb907500268ab7fbbe24e188b"},
		{"LockAcquireFull", &Lock{Header: h(contract.OpLockAcquire), Holder: "a", TTLSeconds: 30, Semantics: sem, SpecRef: "spec/1"}, "a6d55136026c68a32a39a9be4150324f"},
		{"LockExtend", &Lock{Header: h(contract.OpLockExtend), Holder: "a", TTLSeconds: 30}, "7413e0dbabf824e2232d87e4cc4965ff"},
		{"LockRelease", &Lock{Header: h(contract.OpLockRelease), Holder: "a"}, "fa6513694dccabb05a27df9394e66309"},
		{"LeaderElect", &Lock{Header: h(contract.OpLeaderElect), Holder: "a", TTLSeconds: 10}, "21d3e22c7ec86f57343455163dddc0d5"},
		{"LeaderHeartbeat", &Lock{Header: h(contract.OpLeaderHeartbeat), Holder: "a", TTLSeconds: 10}, "36ab3c3a04f63a524a32db3206bf3f5d"},
		{"LeaderResign", &Lock{Header: h(contract.OpLeaderResign), Holder: "a"}, "3f5e8ba74da4c427c431f32cbd245c2e"},
		{"QPush", &Queue{Header: h(contract.OpQPush), Value: val}, "2617968c6e3978bddec423cbdf7538e3"},
		{"QPushFull", &Queue{Header: h(contract.OpQPush), Value: val, ExpectedVersion: ptr(1), TTLSeconds: 60, Priority: 3, DedupID: "d", ItemTTL: 90}, "a49ee56dbace16a5119961566501cebd"},
		{"QPop", &Queue{Header: h(contract.OpQPop), Visibility: 30}, "5e6b09c7717c868d1e6487fab0f5035f"},
		{"QAck", &Queue{Header: h(contract.OpQAck), Item: "m", Delivery: 2}, "38f9b9ab9a74e9bc6a3b00ecfe392084"},
		{"QAckNonce", &Queue{Header: h(contract.OpQAck), Item: "m", Delivery: 2, ReceiptNonce: "n"}, "c8c5e3d6fb809274f6314231b463c270"},
		{"QRequeue", &Queue{Header: Header{Key: key, Op: contract.OpQRequeue}, Item: "m", Delivery: 1}, "d0c03691cddf483b10edab6ed57191d0"},
		{"QExpire", &Queue{Header: Header{Key: key, Op: contract.OpQExpire}, Item: "m"}, "fbbda8ecd3bf1cdf79448781fc2263af"},
		{"LPush", &List{Header: h(contract.OpLPush), Value: val}, "1938d7fa49e9026348920b1c8f33f433"},
		{"RPushFull", &List{Header: h(contract.OpRPush), Value: val, ExpectedVersion: ptr(2), TTLSeconds: 60}, "690af6d675608fe2faec99b7f83790ee"},
		{"LPop", &List{Header: h(contract.OpLPop)}, "3c8542782d244aa74f7e8381fad3dc82"},
		{"RPop", &List{Header: h(contract.OpRPop)}, "84b8fa18494ab02ee70a1ac2ec5bbe3e"},
		{"LTrim", &List{Header: h(contract.OpLTrim), Start: 1, Stop: -2}, "f61f46606ba2a933c6e71608713808d8"},
		{"LTrimZero", &List{Header: h(contract.OpLTrim)}, "e5599350c94cb03e8d7bcf41b00422b2"},
		{"SAdd", &Set{Header: h(contract.OpSAdd), Member: "m"}, "cd98d3c734207fc0618a8275dceb0088"},
		{"SAddFull", &Set{Header: h(contract.OpSAdd), Member: "m", ExpectedVersion: ptr(0), TTLSeconds: 60}, "f8e5cfa4f133375b04722b39be0b6e51"},
		{"SRem", &Set{Header: h(contract.OpSRem), Member: "m"}, "06d52621790b06e4eb776c73d6290fe3"},
		{"Blind", &Set{Header: Header{Key: key, Op: contract.OpSAdd, RequestID: "r-1", Principal: "p", Blind: true}, Member: "m"}, "cd98d3c734207fc0618a8275dceb0088"},
		{"Txn", &Txn{Header: h(contract.OpTxn), Steps: []TxnStep{
			{Write: &KV{Header: Header{Key: key, Op: contract.OpPut, Principal: "p"}, Value: val, ExpectedVersion: ptr(0)}, Cond: &contract.Condition{Exists: new(bool)}},
			{Write: &KV{Header: Header{Key: other, Op: contract.OpCheck, Principal: "p"}}, Cond: &contract.Condition{Version: ptr(4), Exists: &yes}},
			{Write: &KV{Header: Header{Key: other, Op: contract.OpPatch, Principal: "p"}, Set: map[string]json.RawMessage{"s": json.RawMessage(`1`)}, If: eq}, Cond: &contract.Condition{Field: "s", Equals: eq.Equals}},
			{Write: &KV{Header: Header{Key: key, Op: contract.OpIncrement, Principal: "p"}, By: 1, Min: ptr(0)}},
		}}, "4bc1acd0258c80199ffc0d5bd88d32c8"},
	} {
		if got := tc.c.digest(); got != tc.want {
			t.Errorf("%s: digest %s, want %s", tc.name, got, tc.want)
		}
	}
}
