package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
)

// The fakes' projection indexes attempt (building) and state (ready) of
// every project.

func (fakeLister) FieldIndexes(context.Context, string) ([]projection.FieldIndex, error) {
	return []projection.FieldIndex{{Field: "attempt"}, {Field: "state", Ready: true}}, nil
}

func (l failingLister) FieldIndexes(context.Context, string) ([]projection.FieldIndex, error) {
	return nil, l.err
}

func (l stubLister) FieldIndexes(context.Context, string) ([]projection.FieldIndex, error) {
	return nil, l.err
}

// TestFieldIndexStatus: GET {scope}/.eskv/field-indexes:indexStatus answers
// the declared fields in name order, each ready or building as the
// projection's index is (building too when the projection has none
// yet); of any other key it is 400 invalid naming key.
func TestFieldIndexStatus(t *testing.T) {
	decl := contract.FieldIndexesKey("tenant/acme/project/demo")
	w := &fakeWriter{states: map[string]keystate.State{decl: {Version: 3, Live: true,
		Entry: contract.Entry{Key: decl, Version: 3, Value: json.RawMessage(`{"fields":["state","new","attempt"]}`)}}}}
	rec := serve(mustServer(t, w), "GET", "/v1/kv/"+decl+":indexStatus", "")
	want := `{"scope":"tenant/acme/project/demo","version":3,"fields":[{"field":"attempt","state":"building"},{"field":"new","state":"building"},{"field":"state","state":"ready"}]}`
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != 200 || got != want {
		t.Fatalf("%d %s\nwant %s", rec.Code, got, want)
	}
	rec = serve(mustServer(t, &fakeWriter{}), "GET", "/v1/kv/"+decl+":indexStatus", "")
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != 200 || got != `{"scope":"tenant/acme/project/demo","version":0,"fields":[]}` {
		t.Fatalf("nothing declared: %d %s", rec.Code, got)
	}
	for _, tc := range []struct{ path, field string }{
		{key + "k:indexStatus", "key"},
		{key + ".eskv/other:indexStatus", "key"},
		{"/v1/kv/" + decl + ":indexStatus?field=a", "field"},
	} {
		rec := serve(mustServer(t, w), "GET", tc.path, "")
		var b contract.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &b); rec.Code != 400 || err != nil || b.Error.Code != contract.EInvalid || b.Error.Field != tc.field {
			t.Errorf("%s: %d %s, want 400 invalid on %s", tc.path, rec.Code, rec.Body, tc.field)
		}
	}
}
