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

func TestListPosition(t *testing.T) {
	ps := []int64{-1 << 63, -1 << 40, -2, -1, 0, 1, 2, 999, 1 << 40, 1<<63 - 1}
	for i, p := range ps {
		m := ListPosition(p)
		if len(m) != 20 {
			t.Fatalf("ListPosition(%d) = %q, not 20 bytes", p, m)
		}
		if back, err := ParseListPosition(m); err != nil || back != p {
			t.Fatalf("ParseListPosition(%q) = %d, %v; want %d", m, back, err, p)
		}
		if i > 0 && ListPosition(ps[i-1]) >= m {
			t.Fatalf("ListPosition(%d) = %q sorts before ListPosition(%d) = %q", p, m, ps[i-1], ListPosition(ps[i-1]))
		}
	}
	for _, bad := range []string{"", "123", "9999999999999999999x", "99999999999999999999"} {
		if _, err := ParseListPosition(bad); err == nil {
			t.Errorf("ParseListPosition(%q) accepted", bad)
		}
	}
}

func TestListRange(t *testing.T) {
	for _, tc := range []struct {
		start, stop, size, from, to int64
		ok                          bool
	}{
		{0, 99, 1000, 0, 99, true},
		{0, 999, 500, 0, 499, true},
		{0, -1, 5, 0, 4, true},
		{-2, -1, 5, 3, 4, true},
		{-100, 1, 5, 0, 1, true},
		{3, 1, 5, 0, 0, false},
		{5, 9, 5, 0, 0, false},
		{0, -1, 0, 0, 0, false},
		{0, -6, 5, 0, 0, false},
		{2, 2, 5, 2, 2, true},
	} {
		from, to, ok := ListRange(tc.start, tc.stop, tc.size)
		if ok != tc.ok || (ok && (from != tc.from || to != tc.to)) {
			t.Errorf("ListRange(%d, %d, %d) = %d, %d, %v; want %d, %d, %v", tc.start, tc.stop, tc.size, from, to, ok, tc.from, tc.to, tc.ok)
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
