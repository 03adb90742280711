package api_test

import (
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestTouchRequests: POST {key}:touch reaches the writer as a touch with
// the TTL (0 for persist), version and requestId of its body; a body
// without exactly one of ttlSeconds and persist, or with expectedVersion
// 0, is refused before the writer is asked.
func TestTouchRequests(t *testing.T) {
	w := &fakeWriter{}
	h := mustServer(t, w)
	if rec := serve(h, "POST", key+"k:touch", `{"ttlSeconds":30,"expectedVersion":3,"requestId":"r"}`); rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if rec := serve(h, "POST", key+"k:touch", `{"persist":true}`); rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if r := w.reqs[0]; r.Op != contract.OpTouch || r.TTLSeconds != 30 || r.ExpectedVersion == nil || *r.ExpectedVersion != 3 || r.RequestID != "r" || r.Value != nil {
		t.Fatalf("touch: %+v", r)
	}
	if r := w.reqs[1]; r.Op != contract.OpTouch || r.TTLSeconds != 0 || r.ExpectedVersion != nil {
		t.Fatalf("persist: %+v", r)
	}
	for _, tc := range []struct{ name, body, field string }{
		{"ErrEmpty", `{}`, "ttlSeconds"},
		{"ErrBoth", `{"ttlSeconds":5,"persist":true}`, "persist"},
		{"ErrTTLZero", `{"ttlSeconds":0}`, "ttlSeconds"},
		{"ErrExpectedZero", `{"ttlSeconds":5,"expectedVersion":0}`, "expectedVersion"},
		{"ErrUnknownField", `{"ttl":5}`, "ttl"},
		{"ErrValue", `{"ttlSeconds":5,"value":1}`, "value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, serve(h, "POST", key+"k:touch", tc.body), 400, contract.EInvalid, tc.field, "")
			if len(w.reqs) != 2 {
				t.Fatalf("the writer was asked: %+v", w.reqs[2:])
			}
		})
	}
}
