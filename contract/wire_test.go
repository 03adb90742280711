package contract

import (
	"encoding/json"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestValidate(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		name  string
		check func() error
		field string // "" when valid
	}{
		{"OKPut", (&PutBody{Value: json.RawMessage(`1`), TTLSeconds: ptr(int64(5))}).Validate, ""},
		{"OKPutSemanticsTTL", (&PutBody{Semantics: &Semantics{TTLSeconds: 5}}).Validate, ""},
		{"ErrPutTTLOverMax", (&PutBody{TTLSeconds: ptr(int64(MaxTTLSeconds + 1))}).Validate, "ttlSeconds"},
		{"ErrPutSemanticsTTLOverMax", (&PutBody{Semantics: &Semantics{TTLSeconds: MaxTTLSeconds + 1}}).Validate, "ttlSeconds"},
		{"ErrPutTTLsDiffer", (&PutBody{TTLSeconds: ptr(int64(5)), Semantics: &Semantics{TTLSeconds: 6}}).Validate, "semantics.ttlSeconds"},
		{"ErrPutNegativeExpected", (&PutBody{ExpectedVersion: ptr(int64(-1))}).Validate, "expectedVersion"},
		{"ErrPutRequestIDTooLong", (&PutBody{RequestID: long(MaxRequestIDLen + 1)}).Validate, "requestId"},
		{"ErrPutSpecRefNUL", (&PutBody{SpecRef: "a\x00"}).Validate, "specRef"},
		{"ErrPutProducerTooLong", (&PutBody{Semantics: &Semantics{Producer: long(MaxProducerLen + 1)}}).Validate, "semantics.producer"},
		{"ErrPutEmptyHint", (&PutBody{Semantics: &Semantics{ConsumerHints: []string{""}}}).Validate, "semantics.consumerHints"},
		{"OKPutKeepTTL", (&PutBody{KeepTTL: true}).Validate, ""},
		{"ErrPutKeepTTLWithTTL", (&PutBody{KeepTTL: true, TTLSeconds: ptr(int64(5))}).Validate, "keepTtl"},
		{"ErrPutKeepTTLWithSemanticsTTL", (&PutBody{KeepTTL: true, Semantics: &Semantics{TTLSeconds: 5}}).Validate, "keepTtl"},
		{"ErrPutPurposeLock", (&PutBody{Semantics: &Semantics{Purpose: PurposeLock}}).Validate, "semantics.purpose"},
		{"ErrPutPurposeLeader", (&PutBody{Semantics: &Semantics{Purpose: PurposeLeader}}).Validate, "semantics.purpose"},
		{"ErrIncrementPurposeLock", (&IncrementBody{WriteOptions: WriteOptions{Semantics: &Semantics{Purpose: PurposeLock}}}).Validate, "semantics.purpose"},
		{"ErrPatchPurposeLeader", (&PatchBody{Unset: []string{"a"}, WriteOptions: WriteOptions{Semantics: &Semantics{Purpose: PurposeLeader}}}).Validate, "semantics.purpose"},
		{"ErrDeleteNegative", (&DeleteParams{ExpectedVersion: ptr(int64(-1))}).Validate, "expectedVersion"},
		{"OKIncrement", (&IncrementBody{By: ptr(int64(-3))}).Validate, ""},
		{"OKTouch", (&TouchBody{TTLSeconds: ptr(int64(30)), ExpectedVersion: ptr(int64(2))}).Validate, ""},
		{"OKTouchPersist", (&TouchBody{Persist: true}).Validate, ""},
		{"ErrTouchNeither", (&TouchBody{}).Validate, "ttlSeconds"},
		{"ErrTouchBoth", (&TouchBody{Persist: true, TTLSeconds: ptr(int64(30))}).Validate, "persist"},
		{"ErrTouchTTLZero", (&TouchBody{TTLSeconds: ptr(int64(0))}).Validate, "ttlSeconds"},
		{"ErrTouchTTLOverMax", (&TouchBody{TTLSeconds: ptr(int64(MaxTTLSeconds + 1))}).Validate, "ttlSeconds"},
		{"ErrTouchExpectedZero", (&TouchBody{Persist: true, ExpectedVersion: ptr(int64(0))}).Validate, "expectedVersion"},
		{"ErrTouchRequestIDTooLong", (&TouchBody{Persist: true, RequestID: long(MaxRequestIDLen + 1)}).Validate, "requestId"},
		{"ErrIncrementByZero", (&IncrementBody{By: ptr(int64(0))}).Validate, "by"},
		{"OKIncrementBounds", (&IncrementBody{By: ptr(int64(-1)), Min: ptr(int64(0)), Max: ptr(int64(10))}).Validate, ""},
		{"OKIncrementMinEqualsMax", (&IncrementBody{Min: ptr(int64(5)), Max: ptr(int64(5))}).Validate, ""},
		{"OKIncrementMinOnly", (&IncrementBody{Min: ptr(int64(-3))}).Validate, ""},
		{"ErrIncrementMaxBelowMin", (&IncrementBody{Min: ptr(int64(1)), Max: ptr(int64(0))}).Validate, "max"},
		{"ErrIncrementTTLZero", (&IncrementBody{WriteOptions: WriteOptions{TTLSeconds: ptr(int64(0))}}).Validate, "ttlSeconds"},
		{"OKPatch", (&PatchBody{Set: map[string]json.RawMessage{"a": json.RawMessage(`1`)}, Unset: []string{"b"}}).Validate, ""},
		{"ErrPatchFieldTooLong", (&PatchBody{Unset: []string{long(MaxFieldNameBytes + 1)}}).Validate, "unset"},
		{"ErrPatchIfField", (&PatchBody{Unset: []string{"a"}, If: &FieldCondition{Equals: json.RawMessage(`1`)}}).Validate, "if.field"},
		{"OKLock", func() error { return (&LockBody{Holder: "h", TTLSeconds: ptr(int64(30))}).ValidateFor(OpLockAcquire) }, ""},
		{"ErrLockHolderTooLong", func() error { return (&LockBody{Holder: long(MaxHolderLen + 1)}).ValidateFor(OpLockExtend) }, "holder"},
		{"ErrReleaseTTL", func() error { return (&LockBody{Holder: "h", TTLSeconds: ptr(int64(1))}).ValidateFor(OpLockRelease) }, "ttlSeconds"},
		{"ErrElectLockPurpose", func() error {
			return (&LockBody{Holder: "h", Semantics: &Semantics{Purpose: PurposeLock}}).ValidateFor(OpLeaderElect)
		}, "semantics.purpose"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantInvalid(t, tc.check(), tc.field)
		})
	}
}

// wantInvalid checks that err is nil when field is empty, else invalid
// naming field; it returns the *Error.
func wantInvalid(t *testing.T, err error, field string) *Error {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("want valid, got %v", err)
		}
		return nil
	}
	e, ok := err.(*Error)
	if !ok || e.Code != EInvalid || e.Field != field {
		t.Fatalf("want invalid %s, got %v", field, err)
	}
	return e
}

func TestLockBodyDefaults(t *testing.T) {
	b := LockBody{Holder: "h", Semantics: &Semantics{Producer: "p"}}
	if b.Lease() != DefaultLockTTLSeconds || b.EntrySemantics(OpLeaderElect).Purpose != PurposeLeader ||
		b.EntrySemantics(OpLeaderResign).Producer != "" {
		t.Fatalf("lease %d, semantics %+v", b.Lease(), b.EntrySemantics(OpLeaderElect))
	}
}

func TestPutBodyKeepsSemantics(t *testing.T) {
	if s := (&PutBody{}).EntrySemantics(); s.Purpose != "" {
		t.Fatalf("a put without semantics must keep the entry's, got %+v", s)
	}
	if s := (&PutBody{Semantics: &Semantics{Producer: "p"}}).EntrySemantics(); s.Purpose != "other" || s.Producer != "p" {
		t.Fatalf("semantics given: %+v", s)
	}
}

func TestErrorDetailRoundTrip(t *testing.T) {
	cur := &Entry{Key: "tenant/a/project/b/k", Version: 4, Value: json.RawMessage(`{"holder":"x"}`)}
	e := &Error{Code: ELockHeld, Message: "held", Field: "holder", Current: cur}
	d := e.Detail()
	got := d.AsError(cur.Key)
	if got.Code != e.Code || got.Field != e.Field || got.Current == nil || got.Current.Version != 4 || string(got.Current.Value) != string(cur.Value) {
		t.Fatalf("round trip %+v", got)
	}
	d = (&Error{Code: EConflict, Message: "absent"}).Detail()
	if d.CurrentVersion == nil || *d.CurrentVersion != 0 || string(d.CurrentValue) != "null" || d.AsError("k").Current != nil {
		t.Fatalf("conflict on an absent key: %+v", d)
	}
}
