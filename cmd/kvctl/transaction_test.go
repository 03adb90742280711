package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eskv/eskv/events"
)

// TestParseTxnFile reads the seed's transaction files and eskv's own
// into the API's body; a malformed file names what is wrong and where.
func TestParseTxnFile(t *testing.T) {
	const project = "tenant/acme/project/demo"
	i64 := func(v int64) *int64 { return &v }
	yes, no := true, false
	for _, tc := range []struct {
		name    string
		file    string
		project string
		want    events.TxnBody
		err     string // "" when valid
	}{
		{"OKSeedExample", `[
  {"op": "set", "key": "account/balance", "value": 1000, "condition": "attribute_not_exists(PK)"},
  {"op": "inc", "key": "counter/transactions", "by": 1},
  {"op": "delete", "key": "temp/lock", "condition": "attribute_exists(PK)"}
]`, project, events.TxnBody{Ops: []events.TxnOp{
			{Op: events.OpPut, Key: project + "/account/balance", Value: json.RawMessage(`1000`), Condition: &events.Condition{Exists: &no}},
			{Op: events.OpIncrement, Key: project + "/counter/transactions", By: i64(1), Create: true},
			{Op: events.OpDelete, Key: project + "/temp/lock", Condition: &events.Condition{Exists: &yes}},
		}}, ""},
		{"OKSeedUseCase8", `[{"op":"inc","key":"total-requests","by":1},{"op":"inc","key":"successful-requests","by":1},
  {"op":"set","key":"last-request-time","value":"1700000000"}]`, project + "/", events.TxnBody{Ops: []events.TxnOp{
			{Op: events.OpIncrement, Key: project + "/total-requests", By: i64(1), Create: true},
			{Op: events.OpIncrement, Key: project + "/successful-requests", By: i64(1), Create: true},
			{Op: events.OpPut, Key: project + "/last-request-time", Value: json.RawMessage(`"1700000000"`)},
		}}, ""},
		{"OKEskvOps", `{"requestId":"t-1","ops":[
  {"op":"put","key":"tenant/a/project/p/x","value":{"n":1},"condition":{"expectedVersion":3}},
  {"op":"increment","key":"tenant/a/project/p/c","by":2},
  {"op":"dec","key":"tenant/a/project/p/d","create":false},
  {"op":"patch","key":"tenant/a/project/p/o","set":{"s":"done"},"unset":["e"],"condition":{"field":"s","equals":"open"}},
  {"op":"check","key":"tenant/a/project/p/l","condition":{"version":7}},
  {"op":"delete","key":"tenant/a/project/p/y","expectedVersion":2},
  {"op":"check","key":"tenant/a/project/p/z","condition":{"exists":false}}]}`, "", events.TxnBody{RequestID: "t-1", Ops: []events.TxnOp{
			{Op: events.OpPut, Key: "tenant/a/project/p/x", Value: json.RawMessage(`{"n":1}`), Condition: &events.Condition{Version: i64(3)}},
			{Op: events.OpIncrement, Key: "tenant/a/project/p/c", By: i64(2)},
			{Op: events.OpIncrement, Key: "tenant/a/project/p/d", By: i64(-1)},
			{Op: events.OpPatch, Key: "tenant/a/project/p/o", Set: map[string]json.RawMessage{"s": json.RawMessage(`"done"`)}, Unset: []string{"e"},
				Condition: &events.Condition{Field: "s", Equals: json.RawMessage(`"open"`)}},
			{Op: events.OpCheck, Key: "tenant/a/project/p/l", Condition: &events.Condition{Version: i64(7)}},
			{Op: events.OpDelete, Key: "tenant/a/project/p/y", Condition: &events.Condition{Version: i64(2)}},
			{Op: events.OpCheck, Key: "tenant/a/project/p/z", Condition: &events.Condition{Exists: &no}},
		}}, ""},
		{"ErrEmpty", " \n", project, events.TxnBody{}, "the file is empty"},
		{"ErrNotJSON", "set a 1", project, events.TxnBody{}, "not JSON"},
		{"ErrBrokenArray", `[{"op":"set"`, project, events.TxnBody{}, "not a JSON array"},
		{"ErrNoOps", `[]`, project, events.TxnBody{}, "no operations"},
		{"ErrUnknownOp", `[{"op":"push","key":"q"}]`, project, events.TxnBody{}, `op 0: op "push" is not one of`},
		{"ErrUnknownMember", `[{"op":"set","key":"a","value":1},{"op":"set","key":"b","valeu":1}]`, project, events.TxnBody{}, `op 1: unknown member "valeu"`},
		{"ErrWrongType", `[{"op":"inc","key":"a","by":"one"}]`, project, events.TxnBody{}, "op 0: by has the wrong type"},
		{"ErrUnknownExpression", `[{"op":"delete","key":"a","condition":"attribute_exists(owner)"}]`, project, events.TxnBody{}, "not a supported expression"},
		{"ErrUnknownConditionMember", `[{"op":"delete","key":"a","condition":{"versoin":1}}]`, project, events.TxnBody{}, `unknown member "versoin"`},
		{"ErrVersionsDisagree", `[{"op":"delete","key":"a","expectedVersion":1,"condition":{"version":2}}]`, project, events.TxnBody{}, "contradicts"},
		{"ErrNoKey", `[{"op":"delete"}]`, project, events.TxnBody{}, "key is missing"},
		{"ErrRelativeKeyWithoutProject", `[{"op":"delete","key":"a"}]`, "", events.TxnBody{}, "no --project"},
		{"ErrBadProject", `[{"op":"delete","key":"a"}]`, "tenant/acme", events.TxnBody{}, "is not tenant/<tenant>/project/<project>"},
		{"ErrUnknownBodyMember", `{"ops":[],"id":"x"}`, project, events.TxnBody{}, `unknown member "id"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTxnFile([]byte(tc.file), tc.project)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one with %q", err, tc.err)
				}
				if txnSolution(err) == "" {
					t.Fatal("no solution")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("the body is not valid: %v", err)
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(tc.want)
			if string(g) != string(w) {
				t.Fatalf("got  %s\nwant %s", g, w)
			}
		})
	}
}
