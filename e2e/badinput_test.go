package e2e

import (
	"strings"
	"testing"
)

// TestBadInput: every malformed request answers its documented 4xx code,
// names the field at fault, and changes nothing.
func TestBadInput(t *testing.T) {
	s := mustStack(t)
	const ok = base + "fine"
	if r := s.do("PUT", ok, devToken, `{"value":"original"}`); r.Status != 200 {
		t.Fatalf("seed: %d %s", r.Status, r.Body)
	}
	big := `{"value":"` + strings.Repeat("x", 64<<10) + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"ErrUppercase", "PUT", "/v1/kv/tenant/acme/project/demo/Upper", `{"value":1}`, 400, "invalid", "key"},
		{"ErrSpace", "PUT", "/v1/kv/tenant/acme/project/demo/a%20b", `{"value":1}`, 400, "invalid", "key"},
		{"ErrTooLong", "PUT", base + strings.Repeat("k", 129-len(base)+len("/v1/kv/")), `{"value":1}`, 400, "invalid", "key"},
		{"ErrMissingTenant", "PUT", "/v1/kv/project/demo/x", `{"value":1}`, 400, "invalid", "key"},
		{"ErrMissingProject", "PUT", "/v1/kv/tenant/acme/x/y", `{"value":1}`, 400, "invalid", "key"},
		{"ErrDotDot", "PUT", "/v1/kv/tenant/acme/project/demo/a/%2E%2E/b", `{"value":1}`, 400, "invalid", "key"},
		{"ErrEmptyComponent", "PUT", "/v1/kv/tenant/acme/project/demo/a//b", `{"value":1}`, 400, "invalid", "key"},
		{"ErrInvalidJSON", "PUT", ok, `{"value":`, 400, "invalid", ""},
		{"ErrValueNotJSON", "PUT", ok, `{"value":nope}`, 400, "invalid", ""},
		{"ErrMissingValue", "PUT", ok, `{"expectedVersion":1}`, 400, "invalid", "value"},
		{"ErrValueTooLarge", "PUT", ok, big, 413, "value_too_large", "value"},
		{"ErrNegativeExpectedVersion", "PUT", ok, `{"value":1,"expectedVersion":-1}`, 400, "invalid", "expectedVersion"},
		{"ErrExpectedVersionNotInt", "PUT", ok, `{"value":1,"expectedVersion":"1"}`, 400, "invalid", "expectedVersion"},
		{"ErrNegativeTTL", "PUT", ok, `{"value":1,"ttlSeconds":-5}`, 400, "invalid", "ttlSeconds"},
		{"ErrZeroTTL", "PUT", ok, `{"value":1,"ttlSeconds":0}`, 400, "invalid", "ttlSeconds"},
		{"ErrAbsurdTTL", "PUT", ok, `{"value":1,"ttlSeconds":999999999999}`, 400, "invalid", "ttlSeconds"},
		{"ErrUnknownField", "PUT", ok, `{"value":1,"expectedVersoin":1}`, 400, "invalid", "expectedVersoin"},
		{"ErrUnknownPurpose", "PUT", ok, `{"value":1,"semantics":{"purpose":"fun"}}`, 400, "invalid", "semantics.purpose"},
		{"ErrUnknownSemanticsField", "PUT", ok, `{"value":1,"semantics":{"purpose":"config","owner":"x"}}`, 400, "invalid", "semantics.owner"},
		{"ErrNULInRequestID", "PUT", ok, `{"value":1,"requestId":"a\u0000b"}`, 400, "invalid", "requestId"},
		{"ErrNULInValue", "PUT", ok, `{"value":"a\u0000b"}`, 400, "invalid", "value"},
		{"ErrNumberPostgresCannotHold", "PUT", ok, `{"value":{"n":1e200000}}`, 400, "invalid", "value"},
		{"ErrRequestIDTooLong", "PUT", ok, `{"value":1,"requestId":"` + strings.Repeat("r", 129) + `"}`, 400, "invalid", "requestId"},
		{"ErrTrailingData", "PUT", ok, `{"value":1} {"value":2}`, 400, "invalid", ""},
		{"ErrDeleteBadExpected", "DELETE", ok + "?expectedVersion=abc", "", 400, "invalid", "expectedVersion"},
		{"ErrDeleteNegativeExpected", "DELETE", ok + "?expectedVersion=-2", "", 400, "invalid", "expectedVersion"},
		{"ErrListNoPrefix", "GET", "/v1/kv", "", 400, "invalid", "prefix"},
		{"ErrListBadLimit", "GET", "/v1/kv?prefix=tenant/acme/project/demo/&limit=0", "", 400, "invalid", "limit"},
		{"ErrListHugeLimit", "GET", "/v1/kv?prefix=tenant/acme/project/demo/&limit=100000", "", 400, "invalid", "limit"},
		{"ErrListBadCursor", "GET", "/v1/kv?prefix=tenant/acme/project/demo/&cursor=!!!", "", 400, "invalid", "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := s.do(tc.method, tc.path, devToken, body)
			if r.Status != tc.status {
				t.Fatalf("want %d, got %d %s", tc.status, r.Status, r.Body)
			}
			d := r.errorBody(t)
			if d.Code != tc.code || (tc.field != "" && d.Field != tc.field) || d.Message == "" {
				t.Fatalf("want code %s field %q, got %+v", tc.code, tc.field, d)
			}
		})
	}
	r := s.do("GET", ok, devToken, nil)
	if e := r.entry(t); e.Version != 1 || string(e.Value) != `"original"` {
		t.Fatalf("bad input changed the entry: %s", r.Body)
	}
	if n := len(s.readLog(t.Context())); n != 1 {
		t.Fatalf("bad input reached the log: %d events", n)
	}
}
