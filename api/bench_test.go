package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/writer"
)

// BenchmarkPutBody: a PUT of a value of about 64 KiB (many small members,
// the costliest shape per byte) through the handler: reading, the member
// checks, decoding and compacting the body.
func BenchmarkPutBody(b *testing.B) {
	var v strings.Builder
	v.WriteString("{")
	for i := 0; v.Len() < 60<<10; i++ {
		fmt.Fprintf(&v, `"member-%d":{"id":%d,"name":"n%d","ok":true},`, i, i, i)
	}
	v.WriteString(`"end":null}`)
	body := `{"value":` + v.String() + `,"expectedVersion":3,"semantics":{"purpose":"config","producer":"bench"}}`
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
	if err != nil {
		b.Fatal(err)
	}
	s, err := api.New(api.Config{Tokens: tokens, MaxValueBytes: contract.DefaultMaxValueBytes}, &fakeWriter{}, fakeLister{}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	h := s.Handler()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("PUT", key+"k", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

// benchWriter answers like fakeWriter without recording the requests, so
// a benchmark's memory does not grow with b.N.
type benchWriter struct{ fakeWriter }

func (w *benchWriter) Do(_ context.Context, c decide.Command) (writer.Result, error) {
	r := writtenOf(c)
	return writer.Result{Entry: contract.Entry{Key: r.Key.String(), Version: 8, Value: r.Value, Semantics: r.Semantics,
		CreatedAt: benchTime, UpdatedAt: benchTime, LastWriter: r.Principal}}, nil
}

var benchTime = time.Date(2026, 11, 24, 6, 0, 0, 123456789, time.UTC)

// benchHandler is the API as cmd/writer wires it (the request histogram
// on a registry, a token table, INFO logs discarded) over w.
func benchHandler(b *testing.B, w api.Writer) http.Handler {
	b.Helper()
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s, err := api.New(api.Config{Tokens: tokens, MaxValueBytes: contract.DefaultMaxValueBytes, Registerer: reg, Gatherer: reg},
		w, fakeLister{}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	return s.Handler()
}

// benchServe sends req's copies through h, as figure 18a's clients do
// (docs/performance.md): the request is rebuilt each time, as net/http
// would, so its costs count.
func benchServe(b *testing.B, h http.Handler, method, target, body string) {
	b.Helper()
	b.ReportAllocs()
	rd := strings.NewReader(body)
	for b.Loop() {
		rd.Reset(body)
		req := httptest.NewRequest(method, target, rd)
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkGet is figure 18a's read: GET /v1/kv/{key} of a small object,
// through echo's router, the middlewares (metrics, causes, auth,
// conflicts) and the entry's answer.
func BenchmarkGet(b *testing.B) {
	k := "tenant/acme/project/demo/k"
	w := &benchWriter{fakeWriter{states: map[string]keystate.State{k: {Version: 7, Live: true, Entry: contract.Entry{
		Key: k, Version: 7, Value: json.RawMessage(`{"n":12345,"s":"some text"}`), CreatedAt: benchTime, UpdatedAt: benchTime,
		LastWriter: "dev", Semantics: contract.Semantics{Purpose: "other"}}}}}}
	benchServe(b, benchHandler(b, w), "GET", key+"k", "")
}

// BenchmarkPutCAS is figure 18a's write: PUT /v1/kv/{key} of a small
// value with expectedVersion, through the same layers as BenchmarkGet.
func BenchmarkPutCAS(b *testing.B) {
	benchServe(b, benchHandler(b, &benchWriter{}), "PUT", key+"k", `{"value":{"n":12346,"s":"some text"},"expectedVersion":7}`)
}
