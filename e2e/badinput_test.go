package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestBadInput: every malformed request — to the key-value routes and to
// the primitives (counters, locks, leaders, field patches) — answers its
// documented 4xx code, names the field at fault, and writes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	const ok = base + "fine"    // holds "original"
	const text = base + "bad/x" // holds "text": no counter, lock or object
	for path, value := range map[string]string{ok: `"original"`, text: `"text"`} {
		if r := s.do("PUT", path, devToken, `{"value":`+value+`}`); r.Status != 200 {
			t.Fatalf("seed %s: %d %s", path, r.Status, r.Body)
		}
	}
	big := `{"value":"` + strings.Repeat("x", 64<<10) + `"}`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, field              string // field "" when the error names none
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
		// A cursor encoding "tenant/acme/project/demo/a\x00": Postgres cannot read a NUL.
		{"ErrListCursorNUL", "GET", "/v1/kv?prefix=tenant/acme/project/demo/&cursor=dGVuYW50L2FjbWUvcHJvamVjdC9kZW1vL2EA", "", 400, "invalid", "cursor"},
		{"ErrDuplicateMember", "PUT", ok, `{"value":3,"expectedVersion":999,"expectedVersion":null}`, 400, "invalid", "expectedVersion"},
		{"ErrDuplicateMemberInValue", "PUT", ok, `{"value":{"a":1,"a":2}}`, 400, "invalid", "value"},
		{"ErrWrongCaseName", "PUT", ok, `{"VALUE":5}`, 400, "invalid", "VALUE"},
		{"ErrKeyDecodedTwice", "GET", base + "fin%2565", "", 400, "invalid", "key"},

		{"ErrPostWithoutVerb", "POST", text, `{}`, 400, contract.EInvalid, "key"},
		{"ErrUnknownVerb", "POST", text + ":explode", `{}`, 400, contract.EInvalid, "key"},
		{"ErrIncrementByZero", "POST", text + ":increment", `{"by":0}`, 400, contract.EInvalid, "by"},
		{"ErrIncrementByFraction", "POST", text + ":increment", `{"by":1.5}`, 400, contract.EInvalid, "by"},
		{"ErrIncrementZeroTTL", "POST", text + ":increment", `{"by":1,"ttlSeconds":0}`, 400, contract.EInvalid, "ttlSeconds"},
		{"ErrIncrementUnknownPurpose", "POST", text + ":increment", `{"by":1,"semantics":{"purpose":"nope"}}`, 400, contract.EInvalid, "semantics.purpose"},
		{"ErrIncrementUnknownSemanticsField", "POST", text + ":increment", `{"by":1,"semantics":{"owner":"x"}}`, 400, contract.EInvalid, "semantics.owner"},
		{"ErrIncrementOfAString", "POST", text + ":increment", `{}`, 409, contract.EWrongType, "value"},
		{"ErrAcquireWithoutHolder", "POST", text + ":acquire", `{}`, 400, contract.EInvalid, "holder"},
		{"ErrAcquireZeroTTL", "POST", text + ":acquire", `{"holder":"a","ttlSeconds":0}`, 400, contract.EInvalid, "ttlSeconds"},
		{"ErrAcquireCounterPurpose", "POST", text + ":acquire", `{"holder":"a","semantics":{"purpose":"counter"}}`, 400, contract.EInvalid, "semantics.purpose"},
		{"ErrAcquireAString", "POST", text + ":acquire", `{"holder":"a"}`, 409, contract.EWrongType, "key"},
		{"ErrReleaseWithTTL", "POST", text + ":release", `{"holder":"a","ttlSeconds":5}`, 400, contract.EInvalid, "ttlSeconds"},
		{"ErrElectUnknownField", "POST", text + ":elect", `{"holder":"a","extra":1}`, 400, contract.EInvalid, "extra"},
		{"ErrPatchNothing", "PATCH", text, `{}`, 400, contract.EInvalid, "set"},
		{"ErrPatchSetAndUnsetSameField", "PATCH", text, `{"set":{"a":1},"unset":["a"]}`, 400, contract.EInvalid, "unset"},
		{"ErrPatchEmptyFieldName", "PATCH", text, `{"set":{"":1}}`, 400, contract.EInvalid, "set"},
		{"ErrPatchIfWithoutEquals", "PATCH", text, `{"set":{"a":1},"if":{"field":"a"}}`, 400, contract.EInvalid, "if.equals"},
		{"ErrPatchIfEmptyField", "PATCH", text, `{"set":{"a":1},"if":{"field":"","equals":1}}`, 400, contract.EInvalid, "if.field"},
		{"ErrPatchAString", "PATCH", text, `{"set":{"a":1}}`, 409, contract.EWrongType, "set"},
		{"ErrPatchAbsent", "PATCH", base + "bad/absent", `{"set":{"a":1}}`, 404, contract.ENotFound, "key"},
		// A key may hold ':' (user:alice): a GET whose last ':' segment
		// is no verb reads that key, absent here.
		{"ErrGetUnknownVerbIsAKey", "GET", text + ":bogus", ``, 404, contract.ENotFound, "key"},
		{"ErrGetFieldOfAString", "GET", text + "?field=a", ``, 409, contract.EWrongType, "field"},
		{"ErrGetUnknownParameter", "GET", text + "?other=a", ``, 400, contract.EInvalid, "other"},
		{"ErrGetLockOfAString", "GET", text + ":lock", ``, 409, contract.EWrongType, "key"},
		{"ErrGetLockAbsent", "GET", base + "bad/absent:lock", ``, 404, contract.ENotFound, "key"},
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
	for path, value := range map[string]string{ok: `"original"`, text: `"text"`} {
		r := s.do("GET", path, devToken, nil)
		if e := r.entry(t); e.Version != 1 || string(e.Value) != value {
			t.Fatalf("bad input changed %s: %s", path, r.Body)
		}
	}
	if n := len(s.readLog(t.Context())); n != 2 {
		t.Fatalf("bad input reached the log: %d events besides the 2 seeds", n-2)
	}
	if r := s.do("PUT", text+":increment", devToken, `{"value":1}`); r.Status != http.StatusBadRequest {
		t.Fatalf("PUT with a verb: %d %s", r.Status, r.Body)
	}
}
