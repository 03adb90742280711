package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
)

// The status page (docs/ui.md): /ui/ serves a read-only page of a
// project's keys for people, behind the same bearer tokens as the API.
// A login form takes a token and answers a session cookie that names the
// token by an HMAC reference (never the token itself); the cookie is
// HttpOnly and SameSite=Strict, and authenticates only the GET routes
// under /ui/ (the page, its JSON under /ui/api/ and its event stream),
// never the API's /v1 routes: a cookie cannot write anything.

//go:embed ui
var uiFiles embed.FS

// uiAssets are the page's static files (ui/assets).
var uiAssets = func() fs.FS {
	sub, err := fs.Sub(uiFiles, "ui/assets")
	if err != nil {
		panic(err)
	}
	return sub
}()

var uiLoginPage = template.Must(template.ParseFS(uiFiles, "ui/login.html"))

// Defaults of the status page.
const (
	// DefaultUISessionTTL is how long a status page session lasts (at
	// most until its token expires).
	DefaultUISessionTTL = 8 * time.Hour
	// MinUIKeyBytes is the shortest UIKey accepted.
	MinUIKeyBytes = 32
	uiCookie      = "eskv_ui"
)

// uiContentPolicy lets the page load only its own files: no inline
// script, no other origin, no framing.
const uiContentPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// uiAuth signs and checks session cookies.
type uiAuth struct {
	// sessionKey signs cookies and derives token references;
	// fingerprintKey keys the fingerprints of values.
	sessionKey, fingerprintKey []byte
	tokens                     *Tokens
	ttl                        time.Duration
	refs                       atomic.Pointer[refTable]
}

// refTable is one token table's credentials by reference.
type refTable struct {
	table *tokenTable
	byRef map[[32]byte]credential
}

// newUIAuth derives the session and fingerprint keys from key (random
// when nil: sessions then work only on this process).
func newUIAuth(key []byte, tokens *Tokens, ttl time.Duration) (*uiAuth, error) {
	if key == nil {
		key = make([]byte, MinUIKeyBytes)
		_, _ = rand.Read(key)
	}
	if len(key) < MinUIKeyBytes {
		return nil, errors.New("api: the status page key (UIKey) must be at least 32 bytes")
	}
	if ttl <= 0 {
		ttl = DefaultUISessionTTL
	}
	return &uiAuth{sessionKey: derive(key, "eskv-ui-session"), fingerprintKey: derive(key, "eskv-ui-fingerprint"), tokens: tokens, ttl: ttl}, nil
}

// derive is HMAC-SHA256(key, label): independent keys from one secret.
func derive(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// ref is the reference a cookie names a token by: an HMAC of its hash,
// so the cookie tells nothing of the token to whoever lacks the key.
func (a *uiAuth) ref(tokenHash [32]byte) [32]byte {
	m := hmac.New(sha256.New, a.sessionKey)
	m.Write([]byte("token\x00"))
	m.Write(tokenHash[:])
	return [32]byte(m.Sum(nil))
}

// lookup finds the credential of a reference in the tokens in force (a
// token removed by a reload ends its sessions).
func (a *uiAuth) lookup(ref [32]byte) (credential, bool) {
	t := a.tokens.table.Load()
	rt := a.refs.Load()
	if rt == nil || rt.table != t {
		rt = &refTable{table: t, byRef: make(map[[32]byte]credential, len(t.byHash))}
		for h, cr := range t.byHash {
			rt.byRef[a.ref(h)] = cr
		}
		a.refs.Store(rt)
	}
	cr, ok := rt.byRef[ref]
	return cr, ok
}

// uiCookieLen is a session cookie's length before base64url: when it
// was made (unix microseconds), its end (unix seconds), the token
// reference and their MAC.
const uiCookieLen = 8 + 8 + 32 + 32

// uiSessionCookie is what a session cookie holds.
type uiSessionCookie struct {
	ref         [32]byte
	issued, end time.Time
}

// cookieValue is a session cookie's value: made at issued, lasting until
// end, for the token ref names; then their MAC, base64url.
func (a *uiAuth) cookieValue(ref [32]byte, issued, end time.Time) string {
	b := make([]byte, 16, uiCookieLen)
	binary.BigEndian.PutUint64(b, uint64(issued.UnixMicro()))
	binary.BigEndian.PutUint64(b[8:], uint64(end.Unix()))
	b = append(b, ref[:]...)
	m := hmac.New(sha256.New, a.sessionKey)
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(m.Sum(b))
}

// parseCookie reads a cookie value whose MAC holds, ended or not.
func (a *uiAuth) parseCookie(v string) (uiSessionCookie, bool) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) != uiCookieLen {
		return uiSessionCookie{}, false
	}
	m := hmac.New(sha256.New, a.sessionKey)
	m.Write(b[:48])
	if subtle.ConstantTimeCompare(m.Sum(nil), b[48:]) != 1 {
		return uiSessionCookie{}, false
	}
	return uiSessionCookie{ref: [32]byte(b[16:48]), issued: time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))),
		end: time.Unix(int64(binary.BigEndian.Uint64(b[8:16])), 0)}, true
}

// session reads a cookie value: the principal and the session, if the
// MAC holds, the session has not reached its end and its token is still
// in force and unexpired. Whether a logout ended it is the server's
// question (uiPrincipal).
func (a *uiAuth) session(v string, now time.Time) (*Principal, uiSessionCookie, bool) {
	sc, ok := a.parseCookie(v)
	if !ok || !now.Before(sc.end) {
		return nil, uiSessionCookie{}, false
	}
	cr, ok := a.lookup(sc.ref)
	if !ok || !cr.expiresAt.IsZero() && !now.Before(cr.expiresAt) {
		return nil, uiSessionCookie{}, false
	}
	return cr.principal, sc, true
}

// routeUI adds the status page's routes.
func (s *Server) routeUI(e *echo.Echo) {
	e.GET("/ui", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/ui/") })
	ui := e.Group("/ui", uiHeaders)
	ui.GET("/login", s.uiLoginForm)
	ui.POST("/login", s.uiLogin)
	ui.POST("/logout", s.uiLogout)
	ui.GET("/assets/*", echo.WrapHandler(http.StripPrefix("/ui/assets/", http.FileServerFS(uiAssets))))
	ui.GET("/", s.uiIndex)
	data := ui.Group("/api", s.uiSession)
	data.GET("/me", s.uiMe)
	// The picker's projects are GET /v1/projects' answer for the
	// session's principal: the same handler, not a second listing.
	data.GET("/projects", s.projects)
	data.GET("/keys", s.uiKeys)
	data.GET("/history", s.uiHistory)
	data.GET("/at", s.uiAt)
	data.GET("/conflicts", s.uiConflicts)
	data.GET("/watch", s.uiWatch)
	data.GET("/overview", s.uiOverview)
	data.GET("/health", s.uiHealth)
	data.GET("/key", s.uiKey)
	data.GET("/peer/conflicts", s.uiPeerConflicts)
}

// uiHeaders sets the page's security headers on every answer under /ui.
func uiHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", uiContentPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin") // no-referrer would make the form's Origin "null"
		h.Set("X-Frame-Options", "DENY")
		if !strings.HasPrefix(c.Request().URL.Path, "/ui/assets/") {
			h.Set("Cache-Control", "no-store")
		}
		return next(c)
	}
}

// uiIndex serves the page to a session, and sends anyone else to the
// login form.
func (s *Server) uiIndex(c echo.Context) error {
	if _, ok, err := s.uiPrincipal(c); err != nil {
		return err
	} else if !ok {
		return c.Redirect(http.StatusSeeOther, "/ui/login")
	}
	b, err := uiFiles.ReadFile("ui/index.html")
	if err != nil {
		return err
	}
	return c.HTMLBlob(http.StatusOK, b)
}

// uiPrincipal is the principal of the request's session cookie, unless
// a logout ended the session (uiLogouts); the error is the logouts'
// store's.
func (s *Server) uiPrincipal(c echo.Context) (*Principal, bool, error) {
	ck, err := c.Cookie(uiCookie)
	if err != nil {
		return nil, false, nil
	}
	p, sc, ok := s.ui.session(ck.Value, s.now())
	if !ok {
		return nil, false, nil
	}
	if ended, err := s.uiLoggedOut(c.Request().Context(), sc); err != nil || ended {
		return nil, false, err
	}
	return p, true, nil
}

// uiSession authenticates the page's data routes by the session cookie
// (and only them: /v1 reads the Authorization header alone).
func (s *Server) uiSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, ok, err := s.uiPrincipal(c)
		if err != nil {
			return err
		}
		if !ok {
			return contract.FieldErrorf(contract.EUnauthenticated, "cookie", "no status page session: log in at /ui/login")
		}
		setPrincipal(c, p)
		return next(c)
	}
}

// loginView is what the login form shows.
type loginView struct {
	Error, Code string
}

func (s *Server) uiLoginForm(c echo.Context) error {
	return s.renderLogin(c, http.StatusOK, loginView{})
}

func (s *Server) renderLogin(c echo.Context, status int, v loginView) error {
	var b strings.Builder
	if err := uiLoginPage.Execute(&b, v); err != nil {
		return err
	}
	return c.HTML(status, b.String())
}

// uiLogin checks the form's token as the API checks a bearer token and
// answers a session cookie, or the form again with why (401; a refusal
// is logged and counted as the API's are).
func (s *Server) uiLogin(c echo.Context) error {
	if !sameOrigin(c.Request()) {
		return contract.FieldErrorf(contract.EForbidden, "Origin", "the login form is posted from another origin")
	}
	tok, err := loginToken(c)
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+tok)
	now := s.now()
	p, aerr := s.cfg.Tokens.authenticate(h, now)
	if aerr != nil {
		s.deny(c, aerr.principal, aerr.reason, aerr.err)
		msg := "unknown or expired token"
		if tok == "" {
			msg = "enter a token"
		}
		return s.renderLogin(c, http.StatusUnauthorized, loginView{Error: msg, Code: contract.EUnauthenticated})
	}
	ref := s.ui.ref(sha256.Sum256([]byte(tok)))
	cr, _ := s.ui.lookup(ref)
	end := now.Add(s.ui.ttl)
	if !cr.expiresAt.IsZero() && cr.expiresAt.Before(end) {
		end = cr.expiresAt
	}
	s.setSessionCookie(c, s.ui.cookieValue(ref, s.uiIssued(c.Request().Context(), ref, now), end), end)
	s.log.Info("status page login", "principal", p.Name)
	return c.Redirect(http.StatusSeeOther, "/ui/")
}

// maxLoginBodyBytes bounds the login form's body: a token, and little
// else.
const maxLoginBodyBytes = 4 << 10

// loginToken is the token of the login form, read from a URL-encoded body
// of at most maxLoginBodyBytes (413 beyond, 415 for another type). It is
// posted before any authentication, so it is never parsed as
// FormValue does: that reads a multipart body of any size, into memory
// and temporary files, before the token can be checked.
func loginToken(c echo.Context) (string, error) {
	if mt, _, _ := mime.ParseMediaType(c.Request().Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		skipBody(c)
		return "", contract.FieldErrorf(contract.EUnsupportedMediaType, "Content-Type", "send the login form as application/x-www-form-urlencoded")
	}
	body, err := readBody(c, maxLoginBodyBytes)
	if err != nil {
		return "", err
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return "", contract.FieldErrorf(contract.EInvalid, "token", "the login form is not URL-encoded")
	}
	return strings.TrimSpace(form.Get("token")), nil
}

// setSessionCookie sets (or, with an empty value, clears) the session
// cookie: HttpOnly, SameSite=Strict, Secure over TLS, for /ui only.
func (s *Server) setSessionCookie(c echo.Context, v string, end time.Time) {
	r := c.Request()
	ck := &http.Cookie{Name: uiCookie, Value: v, Path: "/ui", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https", Expires: end}
	if v == "" {
		ck.MaxAge = -1
	} else {
		ck.MaxAge = int(end.Sub(s.now()).Seconds())
	}
	c.SetCookie(ck)
}

// uiLogout ends the session: the cookie is cleared, and the logout is
// recorded (uiLogouts) so that the cookie, presented again, is refused on
// every writer of the deployment. Recording it failing answers 503 and
// keeps the cookie, so the user sees it and retries.
func (s *Server) uiLogout(c echo.Context) error {
	if !sameOrigin(c.Request()) {
		return contract.FieldErrorf(contract.EForbidden, "Origin", "the logout form is posted from another origin")
	}
	if ck, err := c.Cookie(uiCookie); err == nil {
		if sc, ok := s.ui.parseCookie(ck.Value); ok && s.now().Before(sc.end) {
			if err := s.uiEndSessions(c.Request().Context(), sc); err != nil {
				return err
			}
		}
	}
	s.setSessionCookie(c, "", time.Time{})
	return c.Redirect(http.StatusSeeOther, "/ui/login")
}

// sameOrigin reports whether a form post comes from this server's own
// pages (or from no browser page at all: neither Sec-Fetch-Site nor
// Origin).
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}
