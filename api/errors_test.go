package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/writer"
)

// refusingWriter refuses every write with err.
type refusingWriter struct {
	fakeWriter
	err error
}

func (f *refusingWriter) Do(context.Context, *writer.Request) (writer.Result, error) {
	return writer.Result{}, f.err
}

// TestConflictAnswersHideValues: a 409 tells the current value, and a
// message that may name it or a lock's holder, only to a principal that
// may read the key; a write-only principal gets code, field and version.
func TestConflictAnswersHideValues(t *testing.T) {
	const secret = "sk-live-SECRET123"
	cur := &events.Entry{Key: "tenant/acme/project/demo/k", Version: 5, Value: json.RawMessage(`{"holder":"` + secret + `"}`)}
	const (
		rw        = "token-read-write-0123"
		writeOnly = "token-write-only-0123"
	)
	tokens, err := api.NewTokens([]api.TokenConfig{
		{Token: rw, Principal: "rw", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read, api.Write}}}},
		{Token: writeOnly, Principal: "wo", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Write}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{events.EConflict, events.EFieldMismatch, events.EWrongType, events.ELockHeld, events.ENotLockHolder, events.EOutOfRange} {
		e := events.FieldErrorf(code, "holder", "key %s holds %s", cur.Key, cur.Value)
		e.Current = cur
		w := &refusingWriter{err: e}
		s, err := api.New(api.Config{Tokens: tokens, MaxValueBytes: 1024}, w, fakeLister{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, token string
			showValue   bool
		}{{"OKReaderSeesValue", rw, true}, {"OKWriterSeesVersionOnly", writeOnly, false}} {
			t.Run(code+"/"+tc.name, func(t *testing.T) {
				for _, r := range []struct{ method, path, body string }{
					{"PUT", key + "k", `{"value":1,"expectedVersion":999}`},
					{"PATCH", key + "k", `{"set":{"a":1},"if":{"field":"a","equals":2}}`},
					{"POST", key + "k:increment", `{}`},
					{"POST", key + "k:acquire", `{"holder":"h"}`},
					{"DELETE", key + "k?expectedVersion=1", ``},
				} {
					req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
					req.Header.Set("Authorization", "Bearer "+tc.token)
					req.Header.Set("Content-Type", "application/json")
					rec := httptest.NewRecorder()
					s.Handler().ServeHTTP(rec, req)
					var b events.ErrorBody
					if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || rec.Code != http.StatusConflict || b.Error.Code != code {
						t.Fatalf("%s %s: %d %s", r.method, r.path, rec.Code, rec.Body)
					}
					if b.Error.CurrentVersion == nil || *b.Error.CurrentVersion != 5 || b.Error.Field != "holder" {
						t.Fatalf("%s %s: the version and field are for everyone: %s", r.method, r.path, rec.Body)
					}
					if got := strings.Contains(rec.Body.String(), secret); got != tc.showValue {
						t.Fatalf("%s %s: value shown %v, want %v: %s", r.method, r.path, got, tc.showValue, rec.Body)
					}
				}
			})
		}
	}
}
