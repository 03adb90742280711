package api_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/api"
)

// TestMetricsLabelsBounded: made-up methods and paths, with or without a
// token, are counted under one "other" label each; /metrics does not grow
// with them.
func TestMetricsLabelsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Config{Tokens: tokens, Gatherer: reg, Registerer: reg}, &fakeWriter{}, fakeLister{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	for i := range 200 {
		method := fmt.Sprintf("M%d%s", i, strings.Repeat("X", 1000))
		for _, path := range []string{key + "k", fmt.Sprintf("/nope/%d/%s", i, strings.Repeat("p", 1000))} {
			req := httptest.NewRequest(method, path, nil)
			if i%2 == 0 {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
	}
	serve(h, "GET", key+"k", "")
	serve(h, "GET", "/nope", "")

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	routes, methods := map[string]bool{}, map[string]bool{}
	for _, f := range families {
		if f.GetName() != "eskv_http_request_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "route":
					routes[l.GetValue()] = true
				case "method":
					methods[l.GetValue()] = true
				}
			}
		}
	}
	for r := range routes {
		if r != "other" && r != "/v1/kv/*" {
			t.Errorf("route label %.60q", r)
		}
	}
	for m := range methods {
		if m != "other" && m != http.MethodGet {
			t.Errorf("method label %.60q", m)
		}
	}
	if !routes["other"] || !methods["other"] || !routes["/v1/kv/*"] || !methods["GET"] {
		t.Errorf("routes %v, methods %v: want other and the known ones", routes, methods)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if n, _ := io.Copy(io.Discard, rec.Body); n > 64<<10 {
		t.Errorf("/metrics is %d bytes", n)
	}
}
