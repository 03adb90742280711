package api_test

import (
	"strings"
	"testing"
)

// TestPlainWritesOfLockPurposes: PUT, PATCH and increment with purpose
// lock or leader are refused before the writer is asked.
func TestPlainWritesOfLockPurposes(t *testing.T) {
	for _, tc := range []struct{ name, method, path, body string }{
		{"ErrPutLock", "PUT", key + "k", `{"value":{"holder":"squatter","token":9007199254740993},"semantics":{"purpose":"lock"}}`},
		{"ErrPutLeader", "PUT", key + "k", `{"value":1,"semantics":{"purpose":"leader"}}`},
		{"ErrPatchLock", "PATCH", key + "k", `{"set":{"token":0},"expectedVersion":3,"semantics":{"purpose":"lock"}}`},
		{"ErrIncrementLeader", "POST", key + "k:increment", `{"create":true,"semantics":{"purpose":"leader"}}`},
		{"ErrKeepTTLWithTTL", "PUT", key + "k", `{"value":1,"keepTtl":true,"ttlSeconds":5}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{}
			rec := serve(mustServer(t, w), tc.method, tc.path, tc.body)
			want := "semantics.purpose"
			if tc.name == "ErrKeepTTLWithTTL" {
				want = "keepTtl"
			}
			if rec.Code != 400 || !strings.Contains(rec.Body.String(), `"field":"`+want+`"`) || len(w.reqs) != 0 {
				t.Fatalf("%d %s (writer asked %d times)", rec.Code, rec.Body, len(w.reqs))
			}
		})
	}
}

// TestPutSemanticsAndKeepTTL: a PUT without semantics asks the writer to
// keep the entry's (no purpose); keepTtl reaches the writer.
func TestPutSemanticsAndKeepTTL(t *testing.T) {
	w := &fakeWriter{}
	h := mustServer(t, w)
	if rec := serve(h, "PUT", key+"k", `{"value":1,"keepTtl":true}`); rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if rec := serve(h, "PUT", key+"k", `{"value":1,"semantics":{"producer":"p"}}`); rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if r := w.reqs[0]; !r.KeepTTL || r.Semantics.Purpose != "" {
		t.Fatalf("put without semantics: %+v", r)
	}
	if r := w.reqs[1]; r.KeepTTL || r.Semantics.Purpose != "other" || r.Semantics.Producer != "p" {
		t.Fatalf("put with semantics: %+v", r)
	}
}
