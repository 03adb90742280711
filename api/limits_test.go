package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
)

// Two tenants' principals, each with every right on its own tenant.
const (
	tokenA = "tenant-a-token-0123456789"
	tokenB = "tenant-b-token-0123456789"
)

// twoTenants is a server knowing tokenA (tenant/a) and tokenB
// (tenant/b), around w and list, and its registry.
func twoTenants(tb testing.TB, cfg api.Config, w api.Writer, list api.Lister) (http.Handler, *prometheus.Registry) {
	tb.Helper()
	rights := []api.Right{api.Read, api.Write}
	tokens, err := api.NewTokens([]api.TokenConfig{
		{Token: tokenA, Principal: "a", Grants: []api.Grant{{Prefix: "tenant/a", Rights: rights}}},
		{Token: tokenB, Principal: "b", Grants: []api.Grant{{Prefix: "tenant/b", Rights: rights}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg.Tokens, cfg.Registerer = tokens, reg
	s, err := api.New(cfg, w, list, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	return s.Handler(), reg
}

func serveAs(h http.Handler, tok, method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// holdingLister holds every listing, scan and history of tenant b until
// release is closed, saying so on entered; it answers tenant a's at once.
type holdingLister struct {
	fakeLister
	entered chan<- struct{}
	release <-chan struct{}
}

func (l holdingLister) hold(prefix string) {
	if strings.HasPrefix(prefix, "tenant/b/") {
		l.entered <- struct{}{}
		<-l.release
	}
}

func (l holdingLister) List(_ context.Context, prefix string, _ projection.Page) ([]contract.Entry, bool, error) {
	l.hold(prefix)
	return nil, false, nil
}

func (l holdingLister) History(_ context.Context, key string, _ int64, _, _ int) ([]contract.HistoryVersion, int64, error) {
	l.hold(key)
	return nil, 0, nil
}

// wantRefused checks that rec is 429 too_many_requests naming setting,
// with Retry-After.
func wantRefused(t *testing.T, what string, rec *httptest.ResponseRecorder, setting string) {
	t.Helper()
	var b contract.ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &b)
	if rec.Code != http.StatusTooManyRequests || b.Error.Code != contract.ETooManyRequests || b.Error.Field != setting || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("%s: %d %s (Retry-After %q), want 429 %s on %s with Retry-After", what, rec.Code, rec.Body.String(),
			rec.Header().Get("Retry-After"), contract.ETooManyRequests, setting)
	}
}

// TestListSharePerPrincipal: tenant b holding 17 listings takes only its
// share of the listing slots (the rest of its listings, scans and
// histories answer 429 naming ESKV_MAX_LISTS_PER_PRINCIPAL), and tenant
// a's listings, histories and status page are answered meanwhile.
func TestListSharePerPrincipal(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	w := &fakeWriter{states: map[string]keystate.State{
		"tenant/a/project/p/k": {Version: 1}, "tenant/b/project/p/k": {Version: 1},
	}}
	h, reg := twoTenants(t, api.Config{}, w, holdingLister{entered: entered, release: release})
	codes := make(chan int, 17)
	var wg sync.WaitGroup
	for range 17 {
		wg.Go(func() { codes <- serveAs(h, tokenB, "GET", "/v1/kv?prefix=tenant/b/project/p/", "").Code })
	}
	held, refused := 0, 0
	for held+refused < 17 { // each of b's listings is held or answered
		select {
		case <-entered:
			held++
		case code := <-codes:
			if code != http.StatusTooManyRequests {
				t.Fatalf("tenant b's listing beyond its share: %d, want 429", code)
			}
			refused++
		}
	}
	if held != api.DefaultMaxListsPerPrincipal {
		t.Fatalf("tenant b holds %d listings, want its share, %d", held, api.DefaultMaxListsPerPrincipal)
	}
	wantRefused(t, "tenant b's scan", serveAs(h, tokenB, "GET", "/v1/kv?prefix=tenant/b/project/p/&field=f&op=eq&value=1", ""), api.SettingMaxListsPerPrincipal)
	wantRefused(t, "tenant b's history", serveAs(h, tokenB, "GET", "/v1/kv/tenant/b/project/p/k:history", ""), api.SettingMaxListsPerPrincipal)
	for _, path := range []string{"/v1/kv?prefix=tenant/a/project/p/", "/v1/kv?prefix=tenant/a/project/p/&field=f&op=eq&value=1", "/v1/kv/tenant/a/project/p/k:history"} {
		if rec := serveAs(h, tokenA, "GET", path, ""); rec.Code != http.StatusOK {
			t.Fatalf("tenant a's %s while b holds its share: %d %s, want 200", path, rec.Code, rec.Body.String())
		}
	}
	if code := uiKeysAs(t, h, tokenA, "tenant/a/project/p/"); code != http.StatusOK {
		t.Fatalf("tenant a's status page while b holds its share: %d, want 200", code)
	}
	counted := limited(t, reg, "max_lists_per_principal")
	t.Logf("tenant b: %d listings held, %d refused 429 (%v counted); tenant a: answered 200", held, refused, counted)
	close(release)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("tenant b's held listing: %d, want 200", code)
		}
	}
	if counted != float64(refused+2) { // and b's scan and history
		t.Errorf("eskv_http_limited_total{limit=max_lists_per_principal} = %v, want %d", counted, refused+2)
	}
}

// readerLister records the reader each snapshot of the projection is
// taken for (projection.WithReader), then fails the read.
type readerLister struct {
	fakeLister
	readers chan<- string
}

func (l readerLister) Snapshot(ctx context.Context, _ string, _ int32, _ func(*projection.Store) error) (contract.Cursor, error) {
	l.readers <- projection.ReaderOf(ctx)
	return contract.Cursor{}, errors.New("no projection here")
}

// TestPageReadsNameTheirReader: a page read's snapshot of the projection
// is taken for the principal that asked (its connections are shared
// fairly among principals: projection.TestSnapshotsShareSlotsFairly), for
// a listing, a scan, a history, :smembers, :lrange and :qpeek.
func TestPageReadsNameTheirReader(t *testing.T) {
	readers := make(chan string, 1)
	w := &fakeWriter{states: map[string]keystate.State{"tenant/b/project/p/k": {Version: 1}}}
	h, _ := twoTenants(t, api.Config{}, w, readerLister{readers: readers})
	for _, path := range []string{"/v1/kv?prefix=tenant/b/project/p/", "/v1/kv?prefix=tenant/b/project/p/&field=f&op=eq&value=1",
		"/v1/kv/tenant/b/project/p/k:history", "/v1/kv/tenant/b/project/p/k:smembers", "/v1/kv/tenant/b/project/p/k:lrange?start=0&stop=9",
		"/v1/kv/tenant/b/project/p/k:qpeek"} {
		rec := serveAs(h, tokenB, "GET", path, "")
		select {
		case r := <-readers:
			if r != "b" {
				t.Errorf("%s: snapshot taken for reader %q, want b", path, r)
			}
		default:
			t.Errorf("%s: no snapshot of the projection taken (%d %s)", path, rec.Code, rec.Body.String())
		}
	}
}

// uiKeysAs logs in to the status page with tok and asks for the keys
// under prefix; it returns the status.
func uiKeysAs(t *testing.T, h http.Handler, tok, prefix string) int {
	t.Helper()
	req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("login: %d without a cookie", rec.Code)
	}
	req = httptest.NewRequest("GET", "/ui/api/keys?prefix="+url.QueryEscape(prefix), nil)
	req.AddCookie(cookies[0])
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// limited is eskv_http_limited_total{limit} in reg.
func limited(t *testing.T, reg *prometheus.Registry, limit string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "eskv_http_limited_total" && m.GetLabel()[0].GetValue() == limit {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// withheld sends a request of a body of size bytes but its last one over
// a connection of its own, and reports its status line as soon as one
// comes (none while the server waits for the last byte).
func withheld(t *testing.T, addr, tok, path string, size int, status chan<- string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, tok, size)
	go func() {
		if _, err := conn.Write([]byte(head)); err == nil {
			_, _ = conn.Write(body4MiB[:size-1]) // a refused request's connection may close meanwhile
		}
	}()
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		status <- strings.TrimSpace(line)
	}()
	return conn
}

// body4MiB is what a withheld body sends: its content never matters, as
// its last byte never comes.
var body4MiB = bytes.Repeat([]byte("x"), 4<<20)

// TestBodyBytesSharePerPrincipal: 150 connections of tenant b each
// withholding the last byte of a 4 MiB transaction hold no more than
// b's share of request body memory (ESKV_MAX_BODY_BYTES_PER_PRINCIPAL):
// the others are answered 429 before their body is read, as b's next
// one, while tenant a's write succeeds; once b's connections close, its
// share is free again.
func TestBodyBytesSharePerPrincipal(t *testing.T) {
	h, _ := twoTenants(t, api.Config{}, &fakeWriter{}, fakeLister{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close) // after the connections' Close (cleanups run last first)
	addr := strings.TrimPrefix(srv.URL, "http://")
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	const conns = 150
	status := make(chan string, conns)
	var open []net.Conn
	for range conns {
		open = append(open, withheld(t, addr, tokenB, "/v1/txn", 4<<20, status))
	}
	held := conns - int(api.DefaultMaxBodyBytesPerPrincipal/(4<<20+1))
	refused := 0
	deadline := time.After(30 * time.Second)
	for refused < held {
		select {
		case line := <-status:
			if !strings.HasPrefix(line, "HTTP/1.1 429") {
				t.Fatalf("tenant b's withheld transaction: %q, want 429", line)
			}
			refused++
		case <-deadline:
			t.Fatalf("%d of %d withheld transactions refused, want %d", refused, conns, held)
		}
	}
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	grew := int64(during.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d connections withholding the last byte of 4 MiB: %d refused 429, heap in use grew %d MiB", conns, refused, grew>>20)
	if grew > 64<<20 {
		t.Errorf("heap in use grew %d MiB, want at most b's share (%d MiB) and change", grew>>20, api.DefaultMaxBodyBytesPerPrincipal>>20)
	}
	wantRefused(t, "tenant b's next 4 MiB transaction", serveAs(h, tokenB, "POST", "/v1/txn", string(body4MiB)), api.SettingMaxBodyBytesPerPrincipal)
	put := `{"value":"v"}`
	if rec := serveAs(h, tokenA, "PUT", "/v1/kv/tenant/a/project/p/k", put); rec.Code != http.StatusOK {
		t.Fatalf("tenant a's PUT while b holds its share: %d %s, want 200", rec.Code, rec.Body.String())
	}
	for _, c := range open {
		c.Close()
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); ; <-tick.C {
		rec := serveAs(h, tokenB, "PUT", "/v1/kv/tenant/b/project/p/k", put)
		if rec.Code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tenant b's PUT after its connections closed: %d %s, want 200", rec.Code, rec.Body.String())
		}
	}
}
