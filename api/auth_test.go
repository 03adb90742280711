package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
)

// loadTokens writes content as a tokens file and loads it as the writer
// does.
func loadTokens(tb testing.TB, content string) (*api.Tokens, error) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "tokens.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	cfgs, err := api.LoadTokens(path)
	if err != nil {
		return nil, err
	}
	return api.NewTokens(cfgs)
}

// authServer serves the tokens file content over a fake writer, with its
// log and metrics.
type authServer struct {
	h   http.Handler
	w   *fakeWriter
	log *testenv.Buffer
	reg *prometheus.Registry
}

func mustAuthServer(tb testing.TB, tokens string) *authServer {
	tb.Helper()
	tt, err := loadTokens(tb, tokens)
	if err != nil {
		tb.Fatal(err)
	}
	a := &authServer{w: &fakeWriter{}, log: &testenv.Buffer{}, reg: prometheus.NewRegistry()}
	s, err := api.New(api.Config{Tokens: tt, MaxValueBytes: 1024, Registerer: a.reg, Gatherer: a.reg}, a.w, fakeLister{},
		slog.New(slog.NewJSONHandler(a.log, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	a.h = s.Handler()
	return a
}

// do sends a request with the given Authorization headers.
func (a *authServer) do(method, path, body string, auth ...string) *httptest.ResponseRecorder {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	for _, h := range auth {
		req.Header.Add("Authorization", h)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	return rec
}

func errorOf(tb testing.TB, rec *httptest.ResponseRecorder) contract.ErrorDetail {
	tb.Helper()
	var b contract.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		tb.Fatalf("error body %s: %v", rec.Body, err)
	}
	return b.Error
}

const (
	acmeTok   = "acme-token-0123456789"
	cfgTok    = "cfg-token-0123456789"
	readerTok = "reader-token-0123456789"
	writerTok = "writer-token-0123456789"
	grants    = `{"tokens":[
	{"token":"` + writerTok + `","principal":"writer","grants":[{"prefix":"tenant/acme/","rights":["write"]}]},
	{"token":"` + acmeTok + `","principal":"acme","grants":[{"prefix":"tenant/acme","rights":["read","write"]}]},
	{"token":"` + cfgTok + `","principal":"cfg","grants":[{"prefix":"tenant/beta/project/p/cfg","rights":["read","write"]}]},
	{"token":"` + readerTok + `","principal":"reader","grants":[{"prefix":"tenant/acme/","rights":["read"]}]}]}`
)

// TestGrantsMatchWholeComponents: a grant covers its path and what lies
// below it, never a longer component that starts with the same letters.
func TestGrantsMatchWholeComponents(t *testing.T) {
	a := mustAuthServer(t, grants)
	for _, tc := range []struct {
		name, tok, method, path string
		status                  int
	}{
		{"OKOwnTenant", acmeTok, "PUT", "/v1/kv/tenant/acme/project/p/k", 200},
		{"ErrStringPrefixTenant", acmeTok, "PUT", "/v1/kv/tenant/acmex/project/p/k", 403},
		{"ErrStringPrefixTenantRead", acmeTok, "GET", "/v1/kv/tenant/acmex/project/p/k", 403},
		{"ErrStringPrefixListing", acmeTok, "GET", "/v1/kv?prefix=tenant/acmex/project/p/", 403},
		{"OKListing", acmeTok, "GET", "/v1/kv?prefix=tenant/acme/project/p/", 200},
		{"OKKeyGrantItself", cfgTok, "PUT", "/v1/kv/tenant/beta/project/p/cfg", 200},
		{"OKKeyGrantBelow", cfgTok, "PUT", "/v1/kv/tenant/beta/project/p/cfg/a", 200},
		{"ErrKeyGrantLonger", cfgTok, "PUT", "/v1/kv/tenant/beta/project/p/cfgx", 403},
		{"ErrKeyGrantListingLonger", cfgTok, "GET", "/v1/kv?prefix=tenant/beta/project/p/cfg", 403},
		{"OKKeyGrantListingBelow", cfgTok, "GET", "/v1/kv?prefix=tenant/beta/project/p/cfg/", 200},
		{"ErrReaderWrites", readerTok, "PUT", "/v1/kv/tenant/acme/project/p/k", 403},
		{"ErrReaderOtherTenant", readerTok, "GET", "/v1/kv/tenant/acmex/project/p/k", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(a.w.reqs)
			rec := a.do(tc.method, tc.path, `{"value":1}`, "Bearer "+tc.tok)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.status == 403 {
				if e := errorOf(t, rec); e.Code != contract.EForbidden {
					t.Fatalf("error %+v", e)
				}
				if len(a.w.reqs) != before {
					t.Fatalf("the writer was asked %+v", a.w.reqs[before:])
				}
			}
		})
	}
}

// TestWriteAnswerValueOnlyForReaders: a write's answer carries the
// entry's value only when the caller may read the key.
func TestWriteAnswerValueOnlyForReaders(t *testing.T) {
	a := mustAuthServer(t, grants)
	for _, tc := range []struct {
		tok, want string
	}{
		{writerTok, `"value":null`},
		{acmeTok, `"value":"v-0123"`},
	} {
		rec := a.do("PUT", "/v1/kv/tenant/acme/project/p/k", `{"value":"v-0123"}`, "Bearer "+tc.tok)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %s, want %s", tc.tok, rec.Code, rec.Body, tc.want)
		}
	}
}

// TestTokensFileStrict: every malformed entry is refused at load, naming
// the entry.
func TestTokensFileStrict(t *testing.T) {
	entry := func(principal, grants string, extra ...string) string {
		return `{"token":"tok-` + principal + `-0123456789abcdef","principal":"` + principal + `","grants":` + grants + strings.Join(extra, "") + `}`
	}
	ok := entry("ok", `[{"prefix":"tenant/a/","rights":["read"]}]`)
	file := func(second string) string { return `{"tokens":[` + ok + `,` + second + `]}` }
	for _, tc := range []struct{ name, content, want string }{
		{"ErrUnknownTopField", `{"tokens":[],"token":[]}`, `unknown field "token"`},
		{"ErrUnknownEntryField", file(entry("b", `[{"prefix":"tenant/a/","rights":["read"]}]`, `,"expires":"2030-01-01T00:00:00Z"`)), `token 1`},
		{"ErrUnknownGrantField", file(entry("b", `[{"prefix":"tenant/a/","rights":["read"],"deny":true}]`)), `token 1`},
		{"ErrNoGrants", file(entry("b", `[]`)), `token 1 (b): grants are empty`},
		{"ErrNullGrants", file(entry("b", `null`)), `token 1 (b): grants are empty`},
		{"ErrNoRights", file(entry("b", `[{"prefix":"tenant/a/","rights":[]}]`)), `token 1 (b): grant 0 ("tenant/a/"): rights are empty`},
		{"ErrUnknownRight", file(entry("b", `[{"prefix":"tenant/a/","rights":["admin"]}]`)), `token 1 (b): grant 0 ("tenant/a/"): unknown right "admin"`},
		{"ErrRepeatedRight", file(entry("b", `[{"prefix":"tenant/a/","rights":["read","read"]}]`)), `token 1 (b): grant 0 ("tenant/a/"): right "read" is listed twice`},
		{"ErrEmptyPrefix", file(entry("b", `[{"prefix":"","rights":["read"]}]`)), `token 1 (b): grant 0 (""): prefix is empty`},
		{"ErrSlashPrefix", file(entry("b", `[{"prefix":"/","rights":["read"]}]`)), `token 1 (b): grant 0 ("/"): prefix is empty`},
		{"ErrPrefixNotKeyPath", file(entry("b", `[{"prefix":"acme/","rights":["read"]}]`)), `token 1 (b): grant 0 ("acme/"): prefix must be a key path`},
		{"ErrPrefixNoProject", file(entry("b", `[{"prefix":"tenant/a/x/","rights":["read"]}]`)), `token 1 (b): grant 0 ("tenant/a/x/"): prefix must be a key path`},
		{"ErrPrefixRelative", file(entry("b", `[{"prefix":"tenant/../","rights":["read"]}]`)), `token 1 (b): grant 0 ("tenant/../"): component 2`},
		{"ErrPrefixDoubleSlash", file(entry("b", `[{"prefix":"tenant//a","rights":["read"]}]`)), `token 1 (b): grant 0 ("tenant//a"): component 2`},
		{"ErrPrefixUppercase", file(entry("b", `[{"prefix":"tenant/Acme/","rights":["read"]}]`)), `token 1 (b): grant 0 ("tenant/Acme/"): component 2`},
		{"ErrSamePathTwice", file(entry("b", `[{"prefix":"tenant/a","rights":["read"]},{"prefix":"tenant/a/","rights":["write"]}]`)),
			`token 1 (b): grant 1 ("tenant/a/"): the same path is granted twice`},
		{"ErrDuplicatePrincipal", file(entry("ok", `[{"prefix":"tenant/b/","rights":["read"]}]`)), `token 1 (ok): duplicate principal`},
		{"ErrReservedDev", file(entry("dev", `[{"prefix":"tenant/b/","rights":["read"]}]`)), `token 1 (dev): principal name is reserved`},
		{"ErrReservedSweeper", file(entry("eskv-sweeper", `[{"prefix":"tenant/b/","rights":["read"]}]`)), `token 1 (eskv-sweeper): principal name is reserved`},
		{"ErrReservedUnknown", file(entry(api.UnknownPrincipal, `[{"prefix":"tenant/b/","rights":["read"]}]`)), `principal name is reserved`},
		{"ErrExpiresAtNotTime", file(entry("b", `[{"prefix":"tenant/b/","rights":["read"]}]`, `,"expiresAt":"tomorrow"`)), `token 1`},
		{"ErrTokenWithSpace", `{"tokens":[{"token":"has a space 0123456789","principal":"b","grants":[{"prefix":"tenant/b/","rights":["read"]}]}]}`,
			`token 0 (b): tokens must be`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadTokens(t, tc.content)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	t.Run("OKWholeTreeAndExpiry", func(t *testing.T) {
		if _, err := loadTokens(t, file(entry("b", `[{"prefix":"tenant/","rights":["read"]},{"prefix":"tenant/b/project/p/k","rights":["write"]}]`,
			`,"expiresAt":"2030-01-01T00:00:00Z"`))); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTokenExpiry: a token past its expiresAt is 401 unauthenticated,
// saying so; before it, it works.
func TestTokenExpiry(t *testing.T) {
	const old, fresh = "old-token-0123456789", "fresh-token-0123456789"
	a := mustAuthServer(t, `{"tokens":[
	{"token":"`+old+`","principal":"old","grants":[{"prefix":"tenant/","rights":["read","write"]}],"expiresAt":"2020-01-01T00:00:00Z"},
	{"token":"`+fresh+`","principal":"fresh","grants":[{"prefix":"tenant/","rights":["read","write"]}],"expiresAt":"`+
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}]}`)
	rec := a.do("PUT", key+"k", `{"value":1}`, "Bearer "+old)
	if e := errorOf(t, rec); rec.Code != 401 || e.Code != contract.EUnauthenticated || !strings.Contains(e.Message, "expired at 2020-01-01T00:00:00Z") {
		t.Fatalf("%d %+v", rec.Code, e)
	}
	if len(a.w.reqs) != 0 {
		t.Fatalf("the writer was asked %+v", a.w.reqs)
	}
	if rec := a.do("PUT", key+"k", `{"value":1}`, "Bearer "+fresh); rec.Code != 200 {
		t.Fatalf("fresh token: %d %s", rec.Code, rec.Body)
	}
}

// TestAuthorizationHeader: the scheme is case-insensitive (RFC 7235); two
// Authorization headers are refused even when both carry the same token.
func TestAuthorizationHeader(t *testing.T) {
	a := mustAuthServer(t, grants)
	path := "/v1/kv/tenant/acme/project/p/k"
	for _, tc := range []struct {
		name        string
		auth        []string
		status      int
		code, field string
	}{
		{"OKBearer", []string{"Bearer " + acmeTok}, 200, "", ""},
		{"OKLowercase", []string{"bearer " + acmeTok}, 200, "", ""},
		{"OKUppercase", []string{"BEARER " + acmeTok}, 200, "", ""},
		{"OKExtraSpaces", []string{"Bearer   " + acmeTok}, 200, "", ""},
		{"ErrTwoHeaders", []string{"Bearer " + acmeTok, "Bearer " + readerTok}, 400, contract.EInvalid, "Authorization"},
		{"ErrTwoSameHeaders", []string{"Bearer " + acmeTok, "Bearer " + acmeTok}, 400, contract.EInvalid, "Authorization"},
		{"ErrNoHeader", nil, 401, contract.EUnauthenticated, ""},
		{"ErrBasic", []string{"Basic " + acmeTok}, 401, contract.EUnauthenticated, ""},
		{"ErrSchemeOnly", []string{"Bearer"}, 401, contract.EUnauthenticated, ""},
		{"ErrTwoTokensInOne", []string{"Bearer " + acmeTok + ", Bearer " + readerTok}, 401, contract.EUnauthenticated, ""},
		{"ErrUnknownToken", []string{"Bearer nope-0123456789abcdef"}, 401, contract.EUnauthenticated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(a.w.reqs)
			rec := a.do("PUT", path, `{"value":1}`, tc.auth...)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.status == 200 {
				return
			}
			if e := errorOf(t, rec); e.Code != tc.code || e.Field != tc.field {
				t.Fatalf("error %+v", e)
			}
			if len(a.w.reqs) != before {
				t.Fatalf("the writer was asked %+v", a.w.reqs[before:])
			}
		})
	}
}

// TestDenialsLoggedAndCounted: 401s and 403s are counted by reason (no
// metric names a principal), and logged within a budget, with principal,
// key and reason but never the value.
func TestDenialsLoggedAndCounted(t *testing.T) {
	a := mustAuthServer(t, grants)
	const secret = "sk-live-SECRET123"
	body := `{"value":"` + secret + `"}`
	a.do("PUT", "/v1/kv/tenant/acme/project/p/k", body)
	for i := range 500 {
		a.do("PUT", "/v1/kv/tenant/beta/project/p/k", body, "Bearer nope-"+strings.Repeat("x", 16)+string(rune('a'+i%26)))
	}
	for range 50 {
		a.do("PUT", "/v1/kv/tenant/acme/project/p/k", body, "Bearer "+readerTok)
	}
	for _, tc := range []struct {
		reason string
		want   float64
	}{
		{"unknown_token", 500},
		{"missing_token", 1},
		{"forbidden", 50},
	} {
		c, err := counter(a.reg, tc.reason)
		if err != nil || c != tc.want {
			t.Errorf("eskv_http_denied_total{reason=%q} = %v (%v), want %v", tc.reason, c, err, tc.want)
		}
	}
	if all, _ := series(a.reg); len(all) != 3 {
		t.Errorf("denial series %v, want 3", all)
	}
	logged := a.log.String()
	if strings.Contains(logged, secret) {
		t.Fatalf("the value reached the log:\n%s", logged)
	}
	lines := strings.Count(logged, `"msg":"request denied"`)
	if lines < 3 || lines > 40 {
		t.Fatalf("%d denial lines for 551 denials, want a few (rate-limited):\n%s", lines, logged)
	}
	for _, want := range []string{`"principal":"reader","method":"PUT","key":"tenant/acme/project/p/k"`, `"reason":"unknown_token","principal":"eskv-unknown"`, `"reason":"missing_token"`} {
		if !strings.Contains(logged, want) {
			t.Errorf("no denial line with %s:\n%s", want, logged)
		}
	}
}

// counter is eskv_http_denied_total{reason}.
func counter(g prometheus.Gatherer, reason string) (float64, error) {
	all, err := series(g)
	return all[reason], err
}

// series returns eskv_http_denied_total by reason; a series with any
// other label is keyed by all its labels.
func series(g prometheus.Gatherer) (map[string]float64, error) {
	mfs, err := g.Gather()
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "eskv_http_denied_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var key []string
			for _, l := range m.GetLabel() {
				key = append(key, l.GetName()+"="+l.GetValue())
			}
			out[strings.TrimPrefix(strings.Join(key, ","), "reason=")] = m.GetCounter().GetValue()
		}
	}
	return out, err
}

// TestUnauthenticatedBodyNotAwaited: a request that declares a body and
// never sends it is answered 401 at once, on a server with no timeouts,
// and its connection is closed.
func TestUnauthenticatedBodyNotAwaited(t *testing.T) {
	a := mustAuthServer(t, grants)
	srv := httptest.NewServer(a.h)
	defer srv.Close()
	for _, tc := range []struct{ name, auth string }{
		{"NoToken", ""},
		{"UnknownToken", "Authorization: Bearer nope-0123456789abcdef\r\n"},
		{"Forbidden", "Authorization: Bearer " + readerTok + "\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
				t.Fatal(err)
			}
			req := "PUT /v1/kv/tenant/acme/project/p/k HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + tc.auth + "Content-Length: 100\r\n\r\n"
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer while the body is unsent: %v", err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 401 && resp.StatusCode != 403 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("connection not closed after the answer: %v", err)
			}
		})
	}
}
