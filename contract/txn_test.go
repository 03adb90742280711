package contract

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTxnBodyValidate(t *testing.T) {
	const k1, k2 = "tenant/a/project/p/k1", "tenant/a/project/p/k2"
	val := json.RawMessage(`1`)
	put := func(key string) TxnOp { return TxnOp{Op: OpPut, Key: key, Value: val} }
	many := make([]TxnOp, MaxTxnOps+1)
	for i := range many {
		many[i] = put("tenant/a/project/p/k" + strings.Repeat("x", i%50) + itoa(i))
	}
	for _, tc := range []struct {
		name     string
		body     TxnBody
		field    string // "" when valid
		failedOp int
	}{
		{"OKAllOps", TxnBody{RequestID: "r", Ops: []TxnOp{
			put(k1),
			{Op: OpDelete, Key: "tenant/a/project/p/d", Condition: &Condition{Exists: ptr(true)}},
			{Op: OpIncrement, Key: "tenant/a/project/p/c", By: ptr(int64(2)), Create: true, Condition: &Condition{Version: ptr(int64(0))}},
			{Op: OpPatch, Key: "tenant/a/project/p/o", Set: map[string]json.RawMessage{"a": val}, Condition: &Condition{Field: "s", Equals: json.RawMessage(`null`)}},
			{Op: OpCheck, Key: "tenant/a/project/p/lock", Condition: &Condition{Version: ptr(int64(7))}},
		}}, "", 0},
		{"OKMaxOps", TxnBody{Ops: many[:MaxTxnOps]}, "", 0},
		{"ErrNoOps", TxnBody{}, "ops", -1},
		{"ErrTooManyOps", TxnBody{Ops: many}, "ops", -1},
		{"ErrRequestIDTooLong", TxnBody{RequestID: strings.Repeat("r", MaxRequestIDLen+1), Ops: []TxnOp{put(k1)}}, "requestId", -1},
		{"ErrUnknownOp", TxnBody{Ops: []TxnOp{put(k1), {Op: OpLockAcquire, Key: k2}}}, "ops[1].op", 1},
		{"ErrBadKey", TxnBody{Ops: []TxnOp{put(k1), put("tenant/a/k")}}, "ops[1].key", 1},
		{"ErrCrossProject", TxnBody{Ops: []TxnOp{put(k1), put("tenant/a/project/q/k")}}, "ops[1].key", 1},
		{"ErrCrossTenant", TxnBody{Ops: []TxnOp{put(k1), put("tenant/b/project/p/k")}}, "ops[1].key", 1},
		{"ErrDuplicateKey", TxnBody{Ops: []TxnOp{put(k1), put(k2), {Op: OpCheck, Key: k1, Condition: &Condition{Exists: ptr(true)}}}}, "ops[2].key", 2},
		{"ErrPutWithoutValue", TxnBody{Ops: []TxnOp{{Op: OpPut, Key: k1}}}, "ops[0].value", 0},
		{"ErrMemberOfAnotherOp", TxnBody{Ops: []TxnOp{{Op: OpPut, Key: k1, Value: val, By: ptr(int64(1))}}}, "ops[0].by", 0},
		{"ErrDeleteWithValue", TxnBody{Ops: []TxnOp{{Op: OpDelete, Key: k1, Value: val}}}, "ops[0].value", 0},
		{"ErrCheckWithoutCondition", TxnBody{Ops: []TxnOp{{Op: OpCheck, Key: k1}}}, "ops[0].condition", 0},
		{"ErrEmptyCondition", TxnBody{Ops: []TxnOp{{Op: OpDelete, Key: k1, Condition: &Condition{}}}}, "ops[0].condition", 0},
		{"ErrNegativeVersion", TxnBody{Ops: []TxnOp{{Op: OpDelete, Key: k1, Condition: &Condition{Version: ptr(int64(-1))}}}}, "ops[0].condition.version", 0},
		{"ErrExistsContradictsVersion", TxnBody{Ops: []TxnOp{{Op: OpCheck, Key: k1, Condition: &Condition{Version: ptr(int64(0)), Exists: ptr(true)}}}}, "ops[0].condition.exists", 0},
		{"ErrFieldWithoutEquals", TxnBody{Ops: []TxnOp{{Op: OpCheck, Key: k1, Condition: &Condition{Field: "f"}}}}, "ops[0].condition.equals", 0},
		{"ErrEqualsWithoutField", TxnBody{Ops: []TxnOp{{Op: OpCheck, Key: k1, Condition: &Condition{Equals: val}}}}, "ops[0].condition.field", 0},
		// The single-key bodies' own rules apply, named inside the op.
		{"ErrPutLockPurpose", TxnBody{Ops: []TxnOp{{Op: OpPut, Key: k1, Value: val, Semantics: &Semantics{Purpose: PurposeLock}}}}, "ops[0].semantics.purpose", 0},
		{"ErrIncrementByZero", TxnBody{Ops: []TxnOp{{Op: OpIncrement, Key: k1, By: ptr(int64(0))}}}, "ops[0].by", 0},
		{"OKIncrementBounds", TxnBody{Ops: []TxnOp{{Op: OpIncrement, Key: k1, By: ptr(int64(-1)), Min: ptr(int64(0)), Max: ptr(int64(9))}}}, "", 0},
		{"ErrIncrementMaxBelowMin", TxnBody{Ops: []TxnOp{{Op: OpIncrement, Key: k1, Min: ptr(int64(2)), Max: ptr(int64(1))}}}, "ops[0].max", 0},
		{"ErrPutWithMin", TxnBody{Ops: []TxnOp{{Op: OpPut, Key: k1, Value: val, Min: ptr(int64(0))}}}, "ops[0].min", 0},
		{"ErrPatchNothing", TxnBody{Ops: []TxnOp{{Op: OpPatch, Key: k1, Unset: []string{}}}}, "ops[0].set", 0},
		{"ErrPutTTL", TxnBody{Ops: []TxnOp{{Op: OpPut, Key: k1, Value: val, TTLSeconds: ptr(int64(0))}}}, "ops[0].ttlSeconds", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := wantInvalid(t, tc.body.Validate(), tc.field)
			switch {
			case e == nil:
			case tc.failedOp < 0 && e.FailedOp != nil:
				t.Fatalf("failedOp %d on an error about the whole body", *e.FailedOp)
			case tc.failedOp >= 0 && (e.FailedOp == nil || *e.FailedOp != tc.failedOp):
				t.Fatalf("failedOp = %v, want %d", e.FailedOp, tc.failedOp)
			}
		})
	}
}

func TestTxnCrossProjectMessageSaysWhy(t *testing.T) {
	b := TxnBody{Ops: []TxnOp{
		{Op: OpPut, Key: "tenant/a/project/p/k", Value: json.RawMessage(`1`)},
		{Op: OpPut, Key: "tenant/a/project/q/k", Value: json.RawMessage(`1`)},
	}}
	err := b.Validate()
	if err == nil || !strings.Contains(err.Error(), "one project") || !strings.Contains(err.Error(), "tenant/a/project/q") {
		t.Fatalf("the message must say the keys span projects and why: %v", err)
	}
}

func TestErrorDetailFailedOpRoundTrip(t *testing.T) {
	e := InOp(3, &Error{Code: EConflict, Message: "m", Field: "condition.version",
		Current: &Entry{Key: "tenant/a/project/p/k", Version: 2, Value: json.RawMessage(`5`)}}).(*Error)
	d := e.Detail()
	if d.FailedOp == nil || *d.FailedOp != 3 || d.Field != "ops[3].condition.version" || *d.CurrentVersion != 2 {
		t.Fatalf("detail %+v", d)
	}
	b, _ := json.Marshal(d)
	if !strings.Contains(string(b), `"failedOp":3`) {
		t.Fatalf("JSON %s has no failedOp", b)
	}
	back := d.AsError("tenant/a/project/p/k")
	if back.FailedOp == nil || *back.FailedOp != 3 || back.Current.Version != 2 {
		t.Fatalf("round trip %+v", back)
	}
}
