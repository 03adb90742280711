package api_test

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/events"
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
	s, err := api.New(api.Config{Tokens: tokens, MaxValueBytes: events.DefaultMaxValueBytes}, &fakeWriter{}, fakeLister{}, slog.New(slog.DiscardHandler))
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
