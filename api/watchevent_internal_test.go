package api

import (
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestWatchEventOf: a delete is delivered without a value, a put with
// the value after it, each with its resume cursor.
func TestWatchEventOf(t *testing.T) {
	e := contract.Event{Key: "tenant/a/project/p/k", Version: 2, Kind: contract.KindDelete, Op: contract.OpDelete, Before: []byte(`1`), Principal: "x"}
	w := watchEventOf(&e, contract.Cursor{Partition: 1, Offset: 7})
	if w.Cursor != "p1.o7" || w.Value != nil || w.Kind != contract.KindDelete {
		t.Fatalf("delete: %+v", w)
	}
	e = contract.Event{Key: "tenant/a/project/p/k", Version: 3, Kind: contract.KindPut, Op: contract.OpSet, After: []byte(`{"a":1}`)}
	if w := watchEventOf(&e, contract.Cursor{Partition: 1, Offset: 9}); string(w.Value) != `{"a":1}` {
		t.Fatalf("put: %+v", w)
	}
}
