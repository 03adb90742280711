package api_test

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
)

// TestUILoginCookie: over TLS (or behind a proxy that says https) the
// session cookie is Secure as well as HttpOnly and SameSite=Strict; a
// page from another site cannot post the login form; the security
// headers allow only the page's own files.
func TestUILoginCookie(t *testing.T) {
	h := serverWith(t, &fakeWriter{}, api.DevToken(token))
	login := func(mod func(*http.Request)) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		mod(req)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for name, mod := range map[string]func(*http.Request){
		"TLS":             func(r *http.Request) { r.TLS = &tls.ConnectionState{} },
		"ForwardedHTTPS":  func(r *http.Request) { r.Header.Set("X-Forwarded-Proto", "https") },
		"SameOriginFetch": func(r *http.Request) { r.TLS = &tls.ConnectionState{}; r.Header.Set("Sec-Fetch-Site", "same-origin") },
	} {
		rec := login(mod)
		cookies := rec.Result().Cookies()
		if rec.Code != http.StatusSeeOther || len(cookies) != 1 {
			t.Fatalf("%s: %d with %d cookies, want 303 and the session", name, rec.Code, len(cookies))
		}
		if c := cookies[0]; !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || strings.Contains(c.Value, token) {
			t.Fatalf("%s: cookie %+v, want Secure, HttpOnly, SameSite=Strict, no token", name, c)
		}
	}
	if rec := login(func(*http.Request) {}); rec.Result().Cookies()[0].Secure {
		t.Fatal("a plain HTTP login set a Secure cookie the browser would not send back")
	}
	rec := login(func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") })
	if rec.Code != http.StatusForbidden || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("cross-site login: %d, want 403 without a cookie", rec.Code)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("Content-Security-Policy %q", csp)
	}
}
