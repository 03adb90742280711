package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/writer"
)

const listPath = "/v1/kv?prefix=tenant/acme/project/demo/"

func entries(n, valueBytes int) []contract.Entry {
	var es []contract.Entry
	for i := range n {
		es = append(es, contract.Entry{Key: fmt.Sprintf("tenant/acme/project/demo/k%02d", i), Version: 1,
			Value: json.RawMessage(`"<` + strings.Repeat("v", valueBytes-4) + `>"`), UpdatedAt: time.Unix(0, 0).UTC()})
	}
	return es
}

// TestListAnswerEncoding: the streamed answer is contract.ListAnswer's JSON
// (values as stored, "<" unescaped).
func TestListAnswerEncoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		list stubLister
		path string
		want contract.ListAnswer
	}{
		{"OKEmpty", stubLister{}, listPath, contract.ListAnswer{Items: []contract.Entry{}}},
		{"OKComplete", stubLister{entries: entries(3, 10)}, listPath, contract.ListAnswer{Items: entries(3, 10), Count: 3}},
		{"OKTruncated", stubLister{entries: entries(3, 10)}, listPath + "&limit=2", contract.ListAnswer{Items: entries(2, 10), Count: 2, Truncated: true,
			NextCursor: base64.RawURLEncoding.EncodeToString([]byte("tenant/acme/project/demo/k01"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := mustServerWith(t, api.Config{}, tc.list)
			rec := serve(h, "GET", tc.path, "")
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			enc.Encode(tc.want)
			if rec.Code != http.StatusOK || rec.Body.String() != strings.TrimSuffix(want.String(), "\n") {
				t.Errorf("got %d %s\nwant %s", rec.Code, rec.Body.String(), want.String())
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

// TestListByteBudget: a page stops at the configured byte budget, with
// truncated and a cursor, and holds at least one entry.
func TestListByteBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxBytes int
		want     int
	}{
		{"OKTwoFit", 1000, 2},
		{"OKAtLeastOne", 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := mustServerWith(t, api.Config{MaxListBytes: tc.maxBytes}, stubLister{entries: entries(5, 500)})
			rec := serve(h, "GET", listPath+"&limit=100", "")
			var a contract.ListAnswer
			if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil || rec.Code != http.StatusOK {
				t.Fatalf("%d %s: %v", rec.Code, rec.Body.String(), err)
			}
			if a.Count != tc.want || !a.Truncated || a.NextCursor == "" {
				t.Errorf("count %d truncated %v cursor %q, want %d entries, truncated, a cursor", a.Count, a.Truncated, a.NextCursor, tc.want)
			}
		})
	}
}

// TestListConcurrencyCap: beyond MaxConcurrentLists listings in progress,
// a listing is answered 429 with Retry-After at once, naming the setting; a bad one still
// 400; once they end, listings are answered again.
func TestListConcurrencyCap(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h, _ := mustServerWith(t, api.Config{MaxConcurrentLists: 2}, stubLister{entries: entries(1, 10), entered: entered, release: release})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if rec := serve(h, "GET", listPath, ""); rec.Code != http.StatusOK {
				t.Errorf("held listing: %d %s", rec.Code, rec.Body.String())
			}
		})
		<-entered
	}
	rec := serve(h, "GET", listPath+"&field=state&op=eq&value=done", "")
	var b contract.ErrorBody
	json.Unmarshal(rec.Body.Bytes(), &b)
	if rec.Code != http.StatusTooManyRequests || b.Error.Code != contract.ETooManyRequests || b.Error.Field != api.SettingMaxLists || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("third listing: %d %s Retry-After %q, want 429 %s on %s with Retry-After 1", rec.Code, rec.Body.String(), rec.Header().Get("Retry-After"), contract.ETooManyRequests, api.SettingMaxLists)
	}
	if rec := serve(h, "GET", listPath+"&limit=0", ""); rec.Code != http.StatusBadRequest {
		t.Errorf("bad listing: %d, want 400", rec.Code)
	}
	close(release)
	wg.Wait()
	go func() {
		for range entered {
		}
	}()
	if rec := serve(h, "GET", listPath, ""); rec.Code != http.StatusOK {
		t.Errorf("listing after the others ended: %d %s", rec.Code, rec.Body.String())
	}
	close(entered)
}

// routingWriter routes every key to owner (this writer when empty and
// local) and answers AwaitProjected with err, recording the prefixes.
type routingWriter struct {
	fakeWriter
	local   bool
	owner   string
	err     error
	awaited []string
	from    []writer.Origin // of each Route call
}

// Route answers as writer.Route does: a request this writer does not own
// is forwarded once, to a known owner, never twice.
func (w *routingWriter) Route(_ contract.Key, from writer.Origin) (bool, string, error) {
	w.from = append(w.from, from)
	if !w.local && (w.owner == "" || from != writer.FromClient) {
		return false, "", &contract.Error{Code: contract.EUnavailable, Message: "moving", RetryAfterSeconds: 1}
	}
	return w.local, w.owner, nil
}

func (w *routingWriter) AwaitProjected(_ context.Context, prefix string) (writer.Projected, error) {
	w.awaited = append(w.awaited, prefix)
	return writer.Projected{}, w.err
}

// TestListRouting: a listing is answered by the owner of its prefix's
// partition after AwaitProjected; another writer forwards it there once
// (path, query and token kept), and answers 503 when it knows no owner or
// the request was forwarded already (ForwardProofs); a client's
// Eskv-Forwarded-By proves nothing and is not passed on; an owner whose
// projector is too far behind answers 503 without querying the
// projection.
func TestListRouting(t *testing.T) {
	var forwarded []*http.Request
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded = append(forwarded, r)
		w.Write([]byte(`{"items":[],"count":0,"truncated":false}`))
	}))
	defer owner.Close()
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
	if err != nil {
		t.Fatal(err)
	}
	behind := &contract.Error{Code: contract.EUnavailable, Message: "partition 1 is waiting for the projector; retry", RetryAfterSeconds: 1}
	const path = listPath + "x&field=state&op=eq&value=done"
	for _, tc := range []struct {
		name      string
		w         routingWriter
		header    string
		want      int
		forwarded bool
		awaited   bool
	}{
		{"OKOwnerWaitsThenLists", routingWriter{local: true}, "", http.StatusOK, false, true},
		{"OKForwardedToOwner", routingWriter{owner: owner.URL}, "", http.StatusOK, true, false},
		{"ErrNoKnownOwner", routingWriter{}, "", http.StatusServiceUnavailable, false, false},
		{"OKClientsForwardedHeaderIgnored", routingWriter{owner: owner.URL}, "w1", http.StatusOK, true, false},
		{"OKClientsOwnURLIgnored", routingWriter{owner: owner.URL}, "w0", http.StatusOK, true, false},
		{"ErrProjectorBehind", routingWriter{local: true, err: behind}, "", http.StatusServiceUnavailable, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forwarded = nil
			list := stubLister{err: errors.New("the projection was queried")}
			if tc.want == http.StatusOK {
				list = stubLister{entries: entries(1, 10)}
			}
			s, err := api.New(api.Config{Tokens: tokens, InstanceID: "w0"}, &tc.w, list, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			if tc.header != "" {
				req.Header.Set(api.ForwardedHeader, tc.header)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			var b contract.ErrorBody
			json.Unmarshal(rec.Body.Bytes(), &b)
			if rec.Code != tc.want || (tc.want != http.StatusOK && (b.Error.Code != contract.EUnavailable || rec.Header().Get("Retry-After") != "1")) {
				t.Fatalf("%d %s Retry-After %q; want %d", rec.Code, rec.Body, rec.Header().Get("Retry-After"), tc.want)
			}
			if got := len(forwarded) == 1; got != tc.forwarded {
				t.Fatalf("forwarded %d times; want %v", len(forwarded), tc.forwarded)
			}
			if tc.forwarded {
				r := forwarded[0]
				if by := r.Header.Values(api.ForwardedHeader); r.URL.RequestURI() != path || len(by) != 1 || !strings.HasPrefix(by[0], "w0 ") ||
					strings.Contains(by[0], ",") || r.Header.Get("Authorization") != "Bearer "+token {
					t.Errorf("forwarded %s with %s=%q", r.URL.RequestURI(), api.ForwardedHeader, r.Header.Get(api.ForwardedHeader))
				}
			}
			if len(tc.w.from) > 1 || len(tc.w.from) == 1 && tc.w.from[0] != writer.FromClient {
				t.Errorf("routed as from %v; want a client's", tc.w.from)
			}
			if got := len(tc.w.awaited) == 1 && tc.w.awaited[0] == "tenant/acme/project/demo/x"; got != tc.awaited {
				t.Errorf("AwaitProjected calls %q; want one of the prefix: %v", tc.w.awaited, tc.awaited)
			}
		})
	}
}
