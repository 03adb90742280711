package schemas_test

import (
	"encoding/json"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/schemas"
)

func conflictSamples() map[string]decide.Conflict {
	mismatch := decide.Conflict{
		SchemaVersion:   contract.SchemaVersion,
		ID:              "c-5b2f0e8e",
		Key:             testKey,
		Scope:           "tenant/acme/project/billing",
		Op:              contract.OpCAS,
		ExpectedVersion: 6,
		CurrentVersion:  7,
		Attempted:       json.RawMessage(`{"offset":1300}`),
		Current:         json.RawMessage(`{"offset":1350}`),
		Semantics:       contract.Semantics{Purpose: "checkpoint", Producer: "invoice-exporter"},
		SpecRef:         "https://specs.example/checkpoints",
		RequestID:       "req-01HQ3Z7A",
		Principal:       "svc:invoice-exporter",
		TS:              t1,
		Reason:          "version_mismatch",
	}
	create := mismatch
	create.Op, create.ExpectedVersion, create.SpecRef, create.RequestID = contract.OpCreate, 0, "", ""

	del := mismatch
	del.Op, del.Attempted = contract.OpDelete, json.RawMessage("null")

	absent := mismatch
	absent.CurrentVersion, absent.Current = 0, json.RawMessage("null")

	reused := mismatch
	reused.Reason = "request_id_reused"

	// A denied write: no value, no version, the request's op.
	forbidden := decide.Conflict{SchemaVersion: contract.SchemaVersion, ID: "c-6a1", Key: testKey, Scope: "tenant/acme/project/billing",
		Op: contract.OpPut, ExpectedVersion: -1, Attempted: json.RawMessage("null"), Current: json.RawMessage("null"),
		Semantics: contract.Semantics{Purpose: "other"}, Principal: "reader", TS: t1, Reason: decide.ReasonForbidden}

	// A rejected transaction: its first failing op, a check.
	txnOp := 2
	txn := mismatch
	txn.Op, txn.Attempted, txn.TxnID, txn.TxnOp, txn.TxnSize = contract.OpCheck, json.RawMessage("null"), "0195508a-3c1e-7d4b-9a61-2f0c8e1d5b74", &txnOp, 3
	txnNotFound := txn
	txnNotFound.Op, txnNotFound.Reason, txnNotFound.CurrentVersion, txnNotFound.Current = contract.OpDelete, contract.ENotFound, 0, json.RawMessage("null")

	return map[string]decide.Conflict{
		"TxnCheck":        txn,
		"TxnNotFound":     txnNotFound,
		"Forbidden":       forbidden,
		"VersionMismatch": mismatch,
		"CreateExisting":  create,
		"Delete":          del,
		"KeyAbsent":       absent,
		"RequestIDReused": reused,
	}
}

func TestConflictMatchesSchema(t *testing.T) {
	checkSamples(t, conflictSamples(), func(c *decide.Conflict) ([]byte, error) { return json.Marshal(c) }, schemas.ValidateConflict,
		func(b []byte) (c decide.Conflict, err error) { err = json.Unmarshal(b, &c); return c, err })

	for _, tc := range []struct {
		name   string
		change func(*decide.Conflict)
		valid  bool
	}{
		{"OKNilValuesAreNull", func(c *decide.Conflict) { c.Attempted, c.Current = nil, nil }, true},
		// The writer must fill in a purpose (the request's, the current
		// entry's, or other): conflict rates are grouped by it.
		{"ErrNoPurpose", func(c *decide.Conflict) { c.Semantics = contract.Semantics{} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := conflictSamples()["VersionMismatch"]
			tc.change(&c)
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if err := schemas.ValidateConflict(b); (err == nil) != tc.valid {
				t.Errorf("valid %v, want %v: %v\n%s", err == nil, tc.valid, err, b)
			}
		})
	}
}
