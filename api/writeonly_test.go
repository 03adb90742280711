package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
)

const writeOnlyToken = "token-write-only-0123"

// writeOnlyServer serves the default token (read and write) and
// writeOnlyToken, which may write tenant/acme/ but not read it.
func writeOnlyServer(t *testing.T, w api.Writer) http.Handler {
	t.Helper()
	return serverWith(t, w,
		api.TokenConfig{Token: token, Principal: "rw", Grants: []api.Grant{{Prefix: "tenant/", Rights: []api.Right{api.Read, api.Write}}}},
		api.TokenConfig{Token: writeOnlyToken, Principal: "wo", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Write}}}})
}

// TestWriteOnlyConditionsRefused: a condition on the value (min, max, if,
// a large addend) is refused to a principal that may not read the key,
// 403 naming the parameter, before the writer is asked, and the refusal
// is audited as a denied write; the same request from a principal that
// may read reaches the writer, marked not blind, and a write-only
// request without a condition reaches it marked blind.
func TestWriteOnlyConditionsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, body, field string
		op                              contract.Op
	}{
		{"ErrIncrementMax", "POST", key + "c:increment", `{"by":1,"max":100}`, "max", contract.OpIncrement},
		{"ErrIncrementMin", "POST", key + "c:increment", `{"by":-1,"min":0}`, "min", contract.OpIncrement},
		{"ErrIncrementHugeBy", "POST", key + "c:increment", `{"by":9223372036854775000}`, "by", contract.OpIncrement},
		{"ErrPatchIf", "PATCH", key + "o", `{"set":{"a":1},"if":{"field":"state","equals":"open"}}`, "if", contract.OpPatch},
		{"OKIncrement", "POST", key + "c:increment", `{"by":4294967296,"expectedVersion":3}`, "", contract.OpIncrement},
		{"OKPatch", "PATCH", key + "o", `{"set":{"a":1},"expectedVersion":3}`, "", contract.OpPatch},
		{"OKSAdd", "POST", key + "s:sadd", `{"member":"m","expectedVersion":3}`, "", contract.OpSAdd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{}
			h := writeOnlyServer(t, w)
			rec := serveAs(h, writeOnlyToken, tc.method, tc.path, tc.body)
			if tc.field == "" {
				if rec.Code != http.StatusOK || len(w.reqs) != 1 || !w.reqs[0].Blind {
					t.Fatalf("%d %s, requests %+v: want a blind request decided", rec.Code, rec.Body, w.reqs)
				}
				return
			}
			var b contract.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || rec.Code != http.StatusForbidden || b.Error.Code != contract.EForbidden || b.Error.Field != tc.field {
				t.Fatalf("%d %s, want 403 forbidden on %s", rec.Code, rec.Body, tc.field)
			}
			if len(w.reqs) != 0 {
				t.Fatalf("the writer was asked %+v", w.reqs)
			}
			if len(w.denied) != 1 || w.denied[0].op != tc.op || w.denied[0].principal != "wo" {
				t.Fatalf("audited %+v, want one denied %s", w.denied, tc.op)
			}
			if rec := serveAs(h, token, tc.method, tc.path, tc.body); rec.Code != http.StatusOK || len(w.reqs) != 1 || w.reqs[0].Blind {
				t.Fatalf("reader: %d %s %+v", rec.Code, rec.Body, w.reqs)
			}
		})
	}
}

// TestWriteOnlySetAnswer: a write-only sadd answers its version (the
// writer makes it move by one whatever the set held) with size 0 and
// without added; a reader's tells both.
func TestWriteOnlySetAnswer(t *testing.T) {
	h := writeOnlyServer(t, &fakeWriter{})
	want := `{"set":"` + strings.TrimPrefix(key, "/v1/kv/") + `s","size":0,"version":7}`
	if rec := serveAs(h, writeOnlyToken, "POST", key+"s:sadd", `{"member":"m"}`); rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != want {
		t.Fatalf("write-only sadd: %d %s, want %s", rec.Code, rec.Body, want)
	}
	if rec := serveAs(h, token, "POST", key+"s:sadd", `{"member":"m"}`); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"added":false`) {
		t.Fatalf("reader's sadd: %d %s", rec.Code, rec.Body)
	}
}
