package api_test

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
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

// uiClient logs in to and uses a status page handler with httptest.
type uiClient struct {
	t *testing.T
}

func (u uiClient) login(h http.Handler) *http.Cookie {
	u.t.Helper()
	req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if cs := rec.Result().Cookies(); rec.Code != http.StatusSeeOther || len(cs) != 1 {
		u.t.Fatalf("login: %d with %d cookies, want 303 and the session", rec.Code, len(cs))
	}
	return rec.Result().Cookies()[0]
}

func (u uiClient) do(h http.Handler, method, path string, ck *http.Cookie) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	if ck != nil {
		req.AddCookie(ck)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// me is the status of GET /ui/api/me with ck.
func (u uiClient) me(h http.Handler, ck *http.Cookie) int {
	return u.do(h, "GET", "/ui/api/me", ck).Code
}

// TestUILogoutEndsSession: a cookie presented after its logout is
// refused (401 on the data, the page sends to the login form) although
// its signature and end are valid, and so is every session of the same
// token made before the logout; a login after it works (issue 28: the
// cookie stayed valid 8 h after logout).
func TestUILogoutEndsSession(t *testing.T) {
	h := serverWith(t, &fakeWriter{}, api.DevToken(token))
	u := uiClient{t}
	ck, other := u.login(h), u.login(h)
	if code := u.me(h, ck); code != http.StatusOK {
		t.Fatalf("GET /ui/api/me with a fresh session: %d", code)
	}
	if rec := u.do(h, "POST", "/ui/logout", ck); rec.Code != http.StatusSeeOther || len(rec.Result().Cookies()) != 1 || rec.Result().Cookies()[0].MaxAge >= 0 {
		t.Fatalf("logout: %d %v; want 303 clearing the cookie", rec.Code, rec.Result().Cookies())
	}
	if code := u.me(h, ck); code != http.StatusUnauthorized {
		t.Fatalf("GET /ui/api/me with the cookie after its logout: %d; want 401", code)
	}
	if rec := u.do(h, "GET", "/ui/", ck); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/ui/login" {
		t.Fatalf("GET /ui/ after logout: %d to %q; want 303 to /ui/login", rec.Code, rec.Header().Get("Location"))
	}
	if code := u.me(h, other); code != http.StatusUnauthorized {
		t.Fatalf("another session of the token made before the logout: %d; want 401", code)
	}
	if code := u.me(h, u.login(h)); code != http.StatusOK {
		t.Fatalf("a login after the logout: %d; want 200", code)
	}
}

// TestUILogoutEndsSessionOnEveryWriter: writers sharing the UI key and
// the projection's database refuse, every one of them, a session logged
// out of on another, at once.
func TestUILogoutEndsSessionOnEveryWriter(t *testing.T) {
	store := projection.New(testenv.MustPostgres(t))
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("a status page key of 32 bytes at least")
	var hs []http.Handler
	for range 2 {
		s, err := api.New(api.Config{Tokens: tokens, UIKey: key, UILogouts: store}, &fakeWriter{}, fakeLister{}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, s.Handler())
	}
	u := uiClient{t}
	ck := u.login(hs[0])
	if code := u.me(hs[1], ck); code != http.StatusOK {
		t.Fatalf("a session made on writer 0, on writer 1: %d; want 200", code)
	}
	if rec := u.do(hs[1], "POST", "/ui/logout", ck); rec.Code != http.StatusSeeOther {
		t.Fatalf("logout on writer 1: %d", rec.Code)
	}
	for w, h := range hs {
		if code := u.me(h, ck); code != http.StatusUnauthorized {
			t.Fatalf("writer %d, the cookie after its logout on writer 1: %d; want 401", w, code)
		}
	}
	fresh := u.login(hs[1])
	for w, h := range hs {
		if code := u.me(h, fresh); code != http.StatusOK {
			t.Fatalf("writer %d, a session made after the logout: %d; want 200", w, code)
		}
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// xs reads 'x' forever.
type xs struct{}

func (xs) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestUILoginBodyBounded: an anonymous login posting 40 MB (a multipart
// file part, or a form field, with or without Content-Length) is refused
// 413 or 415 having read a few KiB at most, allocating no more than a
// few KiB and writing no temporary file.
func TestUILoginBodyBounded(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	h := serverWith(t, &fakeWriter{}, api.DevToken(token))
	const size = 40 << 20
	for _, tc := range []struct {
		name, contentType, head, tail string
		declared                      bool
		want                          int
	}{
		{"ErrMultipart", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"token\"; filename=\"t\"\r\n\r\n", "\r\n--b--\r\n", true, http.StatusUnsupportedMediaType},
		{"ErrMultipartChunked", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\n", "\r\n--b--\r\n", false, http.StatusUnsupportedMediaType},
		{"ErrLargeForm", "application/x-www-form-urlencoded", "token=", "", true, http.StatusRequestEntityTooLarge},
		{"ErrLargeChunkedForm", "application/x-www-form-urlencoded", "token=", "", false, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingReader{r: io.MultiReader(strings.NewReader(tc.head), io.LimitReader(xs{}, size), strings.NewReader(tc.tail))}
			req := httptest.NewRequest("POST", "/ui/login", body)
			req.Header.Set("Content-Type", tc.contentType)
			req.ContentLength = -1
			if tc.declared {
				req.ContentLength = int64(len(tc.head)+len(tc.tail)) + size
			}
			rec := httptest.NewRecorder()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			h.ServeHTTP(rec, req)
			runtime.ReadMemStats(&after)
			files, _ := os.ReadDir(tmp)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: %d, %d bytes of %d read, %d bytes allocated, %d temporary files", tc.name, rec.Code, body.n, req.ContentLength, alloc, len(files))
			if rec.Code != tc.want || body.n > 8<<10 || alloc > 1<<20 || len(files) != 0 {
				t.Fatalf("%d after reading %d bytes, allocating %d, writing %d temporary files; want %d, at most 8 KiB read, 1 MiB allocated, no file",
					rec.Code, body.n, alloc, len(files), tc.want)
			}
			if rec.Header().Get("Connection") != "close" {
				t.Errorf("Connection %q, want close: the unread body is not waited for", rec.Header().Get("Connection"))
			}
		})
	}
}
