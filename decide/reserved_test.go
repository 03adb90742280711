package decide

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eskv/eskv/contract"
)

func TestCheckReserved(t *testing.T) {
	const scope = "tenant/t/project/p"
	decl, other := mustKey(t, contract.FieldIndexesKey(scope)), mustKey(t, scope+"/.eskv/other")
	plain := mustKey(t, scope+"/app/x")
	one := int64(1)
	kv := func(k contract.Key, op contract.Op, value string) *KV {
		return &KV{Header: Header{Key: k, Op: op, Principal: "p"}, Value: []byte(value)}
	}
	with := func(c *KV, f func(*KV)) *KV { f(c); return c }
	tests := []struct {
		name  string
		cmd   Command
		field string // "" when taken
	}{
		{"put of a declaration", kv(decl, contract.OpSet, `{"fields":["state","updated_at"]}`), ""},
		{"empty declaration", kv(decl, contract.OpSet, `{"fields":[]}`), ""},
		{"cas of a declaration", with(kv(decl, contract.OpCAS, `{"fields":["a"]}`), func(c *KV) { c.ExpectedVersion = &one }), ""},
		{"create of a declaration", kv(decl, contract.OpCreate, `{"fields":["a"]}`), ""},
		{"delete of a declaration", kv(decl, contract.OpDelete, ""), ""},
		{"a plain key", kv(plain, contract.OpIncrement, ""), ""},
		{"a denied write", with(kv(other, contract.OpSet, `1`), func(c *KV) { c.Denied = true }), ""},
		{"a range delete", &Range{Header: Header{Key: mustKey(t, scope+"/x"), Op: contract.OpDeleteRange}, Prefix: scope + "/"}, ""},
		{"another reserved key", kv(other, contract.OpSet, `{"fields":[]}`), "key"},
		{"a reserved key's delete", kv(other, contract.OpDelete, ""), "key"},
		{"a patch of a declaration", kv(decl, contract.OpPatch, ""), "key"},
		{"an increment of a declaration", kv(decl, contract.OpIncrement, ""), "key"},
		{"a touch of a declaration", kv(decl, contract.OpTouch, ""), "key"},
		{"a lock on a declaration", &Lock{Header: Header{Key: decl, Op: contract.OpLockAcquire}}, "key"},
		{"a set on a reserved key", &Set{Header: Header{Key: other, Op: contract.OpSAdd}}, "key"},
		{"a TTL", with(kv(decl, contract.OpSet, `{"fields":["a"]}`), func(c *KV) { c.TTLSeconds = 5 }), "ttlSeconds"},
		{"keepTTL", with(kv(decl, contract.OpSet, `{"fields":["a"]}`), func(c *KV) { c.KeepTTL = true }), ""},
		{"a session", with(kv(decl, contract.OpSet, `{"fields":["a"]}`), func(c *KV) { c.Session = scope + "/s" }), "ttlSeconds"},
		{"not an object", kv(decl, contract.OpSet, `["a"]`), "value"},
		{"no fields", kv(decl, contract.OpSet, `{}`), "value"},
		{"null fields", kv(decl, contract.OpSet, `{"fields":null}`), "value"},
		{"another member", kv(decl, contract.OpSet, `{"fields":[],"x":1}`), "value"},
		{"a field not a string", kv(decl, contract.OpSet, `{"fields":[1]}`), "value"},
		{"an empty field", kv(decl, contract.OpSet, `{"fields":[""]}`), "value.fields"},
		{"a long field", kv(decl, contract.OpSet, `{"fields":["`+strings.Repeat("a", contract.MaxFieldNameBytes+1)+`"]}`), "value.fields"},
		{"a field twice", kv(decl, contract.OpSet, `{"fields":["a","a"]}`), "value.fields"},
		{"too many fields", kv(decl, contract.OpSet, `{"fields":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}`), "value.fields"},
		{"a transaction's step", &Txn{Header: Header{Key: plain, Op: contract.OpTxn}, Steps: []TxnStep{
			{Write: kv(plain, contract.OpSet, `1`)}, {Write: kv(decl, contract.OpSet, `{"fields":"a"}`)}}}, "ops[1].value"},
		{"a transaction's valid step", &Txn{Header: Header{Key: plain, Op: contract.OpTxn}, Steps: []TxnStep{
			{Write: kv(decl, contract.OpSet, `{"fields":["a"]}`)}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckReserved(tt.cmd)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *contract.Error
			if !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != tt.field {
				t.Fatalf("err = %#v, want invalid on %s", err, tt.field)
			}
			if e.Message == "" {
				t.Fatal("no message")
			}
		})
	}
}

func TestFieldIndexStatus(t *testing.T) {
	const scope = "tenant/t/project/p"
	decl := mustKey(t, contract.FieldIndexesKey(scope))
	entry := func(value string) *contract.Entry {
		return &contract.Entry{Key: decl.String(), Version: 4, Value: []byte(value)}
	}
	ready, building := contract.FieldIndexReady, contract.FieldIndexBuilding
	tests := []struct {
		name    string
		e       *contract.Entry
		indexed map[string]bool
		version int64
		want    []contract.FieldIndexState
	}{
		{"nothing declared", nil, map[string]bool{"a": true}, 0, []contract.FieldIndexState{}},
		{"declared none", entry(`{"fields":[]}`), nil, 4, []contract.FieldIndexState{}},
		{"ready and building, in name order", entry(`{"fields":["state","attempt","owner"]}`),
			map[string]bool{"state": true, "attempt": false, "owner": true}, 4,
			[]contract.FieldIndexState{{Field: "attempt", State: building}, {Field: "owner", State: ready}, {Field: "state", State: ready}}},
		{"not applied yet: building", entry(`{"fields":["new"]}`), map[string]bool{}, 4, []contract.FieldIndexState{{Field: "new", State: building}}},
		{"dropped: not answered", entry(`{"fields":["kept"]}`), map[string]bool{"kept": true, "dropped": true}, 4,
			[]contract.FieldIndexState{{Field: "kept", State: ready}}},
		{"no declaration's value: nothing", entry(`{"x":1}`), map[string]bool{"x": true}, 4, []contract.FieldIndexState{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := FieldIndexStatus(decl, tt.e, tt.indexed)
			if err != nil {
				t.Fatal(err)
			}
			if a.Scope != scope || a.Version != tt.version || !slices.Equal(a.Fields, tt.want) {
				t.Fatalf("answer %+v, want scope %s, version %d, fields %+v", a, scope, tt.version, tt.want)
			}
		})
	}
	for _, k := range []string{scope + "/app/x", scope + "/.eskv/other", scope + "/app/.eskv/field-indexes"} {
		_, err := FieldIndexStatus(mustKey(t, k), nil, nil)
		var e *contract.Error
		if !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != "key" {
			t.Errorf("%s: err %v, want invalid on key", k, err)
		}
	}
}
