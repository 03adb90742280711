package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
)

const allowedOrigin = "https://app.example.com"

// corsRequest sends method path from origin (none when empty), a
// preflight when method is OPTIONS, without credentials.
func corsRequest(h http.Handler, method, path, origin string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if method == http.MethodOptions {
		req.Header.Set("Access-Control-Request-Method", http.MethodPut)
		req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestCORS: with an allowed origin, its preflight is answered 204
// without a token, allowing Authorization and the methods, bounded
// (Max-Age) and never with credentials; its calls' answers expose
// ESKV-Position. Another origin's preflight and calls get no CORS header
// (the browser refuses them), its calls still need a token; without
// allowed origins nothing has CORS headers; the status page never does.
func TestCORS(t *testing.T) {
	h, _ := mustServerWith(t, api.Config{CORSAllowedOrigins: []string{allowedOrigin}}, fakeLister{})
	t.Run("allowed preflight answered without a token", func(t *testing.T) {
		rec := corsRequest(h, http.MethodOptions, key+"k", allowedOrigin)
		hd := rec.Header()
		if rec.Code != http.StatusNoContent || hd.Get("Access-Control-Allow-Origin") != allowedOrigin {
			t.Fatalf("preflight: %d %v, want 204 allowing %s", rec.Code, hd, allowedOrigin)
		}
		if allowed := hd.Get("Access-Control-Allow-Headers"); !strings.Contains(allowed, "Authorization") || !strings.Contains(allowed, contract.DirectiveHeader) ||
			!strings.Contains(hd.Get("Access-Control-Allow-Methods"), "PUT") {
			t.Fatalf("preflight headers %v: want Authorization, %s and PUT allowed", hd, contract.DirectiveHeader)
		}
		if hd.Get("Access-Control-Max-Age") != "600" || hd.Get("Access-Control-Allow-Credentials") != "" {
			t.Fatalf("preflight headers %v: want Max-Age 600 and no credentials", hd)
		}
	})
	t.Run("allowed origin's call exposes the position", func(t *testing.T) {
		rec := corsRequest(h, http.MethodGet, key+"k", allowedOrigin)
		if rec.Code != http.StatusUnauthorized { // no token: CORS does not authenticate
			t.Fatalf("a call without a token: %d, want 401", rec.Code)
		}
		if got := rec.Header().Get("Access-Control-Expose-Headers"); rec.Header().Get("Access-Control-Allow-Origin") != allowedOrigin || !strings.Contains(got, api.PositionHeader) {
			t.Fatalf("call headers %v: want the origin allowed and %s exposed", rec.Header(), api.PositionHeader)
		}
	})
	t.Run("other origin gets no CORS header", func(t *testing.T) {
		for _, m := range []string{http.MethodOptions, http.MethodGet} {
			rec := corsRequest(h, m, key+"k", "https://evil.example.com")
			if v := rec.Header().Get("Access-Control-Allow-Origin"); v != "" {
				t.Fatalf("%s from another origin: Access-Control-Allow-Origin %q, want none", m, v)
			}
		}
		if rec := corsRequest(h, http.MethodGet, key+"k", "https://evil.example.com"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("another origin's call without a token: %d, want 401", rec.Code)
		}
	})
	t.Run("status page has no CORS header", func(t *testing.T) {
		rec := corsRequest(h, http.MethodOptions, "/ui/api/me", allowedOrigin)
		if v := rec.Header().Get("Access-Control-Allow-Origin"); v != "" {
			t.Fatalf("/ui/ preflight: Access-Control-Allow-Origin %q, want none", v)
		}
	})
	t.Run("no allowed origins sends no CORS header", func(t *testing.T) {
		plain := mustServer(t, &fakeWriter{})
		rec := corsRequest(plain, http.MethodOptions, key+"k", allowedOrigin)
		if v := rec.Header().Get("Access-Control-Allow-Origin"); v != "" {
			t.Fatalf("Access-Control-Allow-Origin %q without allowed origins, want none", v)
		}
	})
}

// TestCheckCORSOrigins: only exact http(s) origins are accepted.
func TestCheckCORSOrigins(t *testing.T) {
	for _, o := range []string{"https://app.example.com", "http://127.0.0.1:5173", "https://[::1]:8443"} {
		t.Run(o+" accepted", func(t *testing.T) {
			if err := api.CheckCORSOrigins([]string{o}); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, o := range []string{"*", "null", "https://*.example.com", "https://app.example.com/", "app.example.com",
		"ftp://app.example.com", "https://app.example.com/path", "https://user@app.example.com"} {
		t.Run(o+" refused", func(t *testing.T) {
			if err := api.CheckCORSOrigins([]string{o}); err == nil {
				t.Fatalf("%q accepted", o)
			}
		})
	}
}
