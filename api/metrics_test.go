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

// TestMetricsOpLabels: requests on /v1/kv/* are labelled by their op from
// the op table (the verb of a custom method), the other API routes by
// what they are, and a made-up verb as other: the key never reaches a
// label.
func TestMetricsOpLabels(t *testing.T) {
	for _, r := range []struct{ method, path, op string }{
		{"GET", key + "k", "get"},
		{"PUT", key + "k", "put"},
		{"DELETE", key + "k", "delete"},
		{"PATCH", key + "k", "patch"},
		{"POST", key + "s:sadd", "sadd"},
		{"GET", key + "s:smembers", "smembers"},
		{"POST", key + "q:qpop", "qpop"},
		{"GET", key + "k:history", "history"},
		{"GET", key + "k:lock", "lock_check"},
		{"POST", key + "k:acquire", "lock_acquire"},
		{"POST", key + "k:made-up-verb-with-a-secret", "other"},
		{"GET", key + "k:sadd", "other"}, // a write's verb on GET
		{"POST", "/v1/txn", "txn"},
		{"GET", "/v1/kv", "list"},
		{"POST", "/v1/kv:batchGet", "batch_get"},
		{"GET", "/v1/projects", "projects"},
		{"GET", "/v1/watch", "watch"},
		{"GET", "/healthz", "none"},
		{"GET", "/nope/secret-path", "none"},
	} {
		reg := prometheus.NewRegistry()
		tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
		if err != nil {
			t.Fatal(err)
		}
		s, err := api.New(api.Config{Tokens: tokens, Gatherer: reg, Registerer: reg}, &fakeWriter{}, fakeLister{}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(r.method, r.path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+token)
		s.Handler().ServeHTTP(httptest.NewRecorder(), req)
		if got := opLabelsOf(t, reg); len(got) != 1 || !got[r.op] {
			t.Errorf("%s %s: op labels %v, want %s", r.method, r.path, got, r.op)
		}
	}
}

// opLabelsOf returns the op label values of eskv_http_request_seconds.
func opLabelsOf(t *testing.T, reg *prometheus.Registry) map[string]bool {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "eskv_http_request_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" {
					ops[l.GetValue()] = true
				}
			}
		}
	}
	return ops
}

// TestMetricsToken: with a metrics token, /metrics answers only requests
// bearing it (an API token does not open it); without one, anyone.
func TestMetricsToken(t *testing.T) {
	const metricsToken = "metrics-token-0123456789"
	for _, tc := range []struct {
		name, configured, sent string
		want                   int
	}{
		{"OKNoTokenConfigured", "", "", http.StatusOK},
		{"OKToken", metricsToken, metricsToken, http.StatusOK},
		{"ErrNoToken", metricsToken, "", http.StatusUnauthorized},
		{"ErrAPIToken", metricsToken, token, http.StatusUnauthorized},
		{"ErrWrongToken", metricsToken, metricsToken + "x", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
			if err != nil {
				t.Fatal(err)
			}
			s, err := api.New(api.Config{Tokens: tokens, Gatherer: reg, Registerer: reg, MetricsToken: tc.configured}, &fakeWriter{}, fakeLister{}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			serve(s.Handler(), "GET", key+"k", "") // a series to serve
			req := httptest.NewRequest("GET", "/metrics", nil)
			if tc.sent != "" {
				req.Header.Set("Authorization", "Bearer "+tc.sent)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.want || (rec.Code == http.StatusOK) != strings.Contains(rec.Body.String(), "eskv_http_request_seconds") {
				t.Fatalf("%d %.200s, want %d", rec.Code, rec.Body.String(), tc.want)
			}
		})
	}
}

// TestMetricsNameNoPrincipal: whatever principals are refused or served,
// /metrics names none of them.
func TestMetricsNameNoPrincipal(t *testing.T) {
	reg := prometheus.NewRegistry()
	tokens, err := api.NewTokens([]api.TokenConfig{
		{Token: "reader-token-0123456789", Principal: "reader-principal", Grants: []api.Grant{{Prefix: "tenant/acme", Rights: []api.Right{api.Read}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Config{Tokens: tokens, Gatherer: reg, Registerer: reg}, &fakeWriter{}, fakeLister{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{key + "k", "/v1/kv/tenant/other/project/p/k"} {
		for _, method := range []string{"GET", "PUT"} {
			req := httptest.NewRequest(method, path, strings.NewReader(`{"value":1}`))
			req.Header.Set("Authorization", "Bearer reader-token-0123456789")
			s.Handler().ServeHTTP(httptest.NewRecorder(), req)
		}
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if body := rec.Body.String(); rec.Code != http.StatusOK || strings.Contains(body, "reader-principal") || strings.Contains(body, "principal=") {
		t.Fatalf("/metrics names a principal:\n%s", body)
	}
}
