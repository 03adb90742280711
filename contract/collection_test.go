package contract

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestMemberBody: members are any UTF-8 text without NUL, 1 to
// MaxMemberBytes bytes; the other fields as for other writes.
func TestMemberBody(t *testing.T) {
	ttl0, ttl1, neg := int64(0), int64(1), int64(-1)
	for _, tc := range []struct {
		name  string
		body  MemberBody
		field string // "" when valid
	}{
		{"OKPlain", MemberBody{Member: "agent-123"}, ""},
		{"OKAnyContent", MemberBody{Member: "a/b:c?d#e%f é 日本 \"q\" \t"}, ""},
		{"OKLongest", MemberBody{Member: strings.Repeat("x", MaxMemberBytes)}, ""},
		{"OKTTL", MemberBody{Member: "m", TTLSeconds: &ttl1}, ""},
		{"ErrEmpty", MemberBody{}, "member"},
		{"ErrTooLong", MemberBody{Member: strings.Repeat("é", MaxMemberBytes/2+1)}, "member"},
		{"ErrNUL", MemberBody{Member: "a\x00b"}, "member"},
		{"ErrInvalidUTF8", MemberBody{Member: "a\xffb"}, "member"},
		{"ErrTTLZero", MemberBody{Member: "m", TTLSeconds: &ttl0}, "ttlSeconds"},
		{"ErrExpectedNegative", MemberBody{Member: "m", ExpectedVersion: &neg}, "expectedVersion"},
		{"ErrRequestIDTooLong", MemberBody{Member: "m", RequestID: strings.Repeat("r", MaxRequestIDLen+1)}, "requestId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.body.Validate()
			var e *Error
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &e) || e.Field != tc.field || e.Code != EInvalid):
				t.Fatalf("error %v, want invalid on %s", err, tc.field)
			}
		})
	}
}

// TestCollectionMeta: metadata round-trips; anything else is refused.
func TestCollectionMeta(t *testing.T) {
	m := CollectionMeta{Type: PurposeSet, Size: 3, Since: 7}
	b, _ := json.Marshal(m)
	if string(b) != `{"type":"set","size":3,"since":7}` {
		t.Fatalf("encoded %s", b)
	}
	if got, err := ParseCollectionMeta(b); err != nil || got != m {
		t.Fatalf("parsed %+v %v", got, err)
	}
	for _, bad := range []string{`1`, `{"type":"counter","size":1,"since":1}`, `{"type":"set","size":-1,"since":1}`, `{"type":"set","size":0}`} {
		if _, err := ParseCollectionMeta(json.RawMessage(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

func TestListBodies(t *testing.T) {
	zero, one := int64(0), int64(1)
	if err := (&TrimBody{Stop: &one}).Validate(); !IsField(err, "start") {
		t.Errorf("trim without start: %v", err)
	}
	if err := (&TrimBody{Start: &zero}).Validate(); !IsField(err, "stop") {
		t.Errorf("trim without stop: %v", err)
	}
	if err := (&TrimBody{Start: &zero, Stop: &one}).Validate(); err != nil {
		t.Errorf("trim: %v", err)
	}
	if err := (&PushBody{TTLSeconds: &zero}).Validate(); !IsField(err, "ttlSeconds") {
		t.Errorf("push ttl 0: %v", err)
	}
}

// IsField reports whether err is an *Error naming field.
func IsField(err error, field string) bool {
	e, ok := err.(*Error)
	return ok && e.Field == field
}
