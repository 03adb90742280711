package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/events"
)

const listPath = "/v1/kv?prefix=tenant/acme/project/demo/"

func entries(n, valueBytes int) []events.Entry {
	var es []events.Entry
	for i := range n {
		es = append(es, events.Entry{Key: fmt.Sprintf("tenant/acme/project/demo/k%02d", i), Version: 1,
			Value: json.RawMessage(`"<` + strings.Repeat("v", valueBytes-4) + `>"`), UpdatedAt: time.Unix(0, 0).UTC()})
	}
	return es
}

// TestListAnswerEncoding: the streamed answer is events.ListAnswer's JSON
// (values as stored, "<" unescaped).
func TestListAnswerEncoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		list stubLister
		path string
		want events.ListAnswer
	}{
		{"OKEmpty", stubLister{}, listPath, events.ListAnswer{Items: []events.Entry{}}},
		{"OKComplete", stubLister{entries: entries(3, 10)}, listPath, events.ListAnswer{Items: entries(3, 10), Count: 3}},
		{"OKTruncated", stubLister{entries: entries(3, 10)}, listPath + "&limit=2", events.ListAnswer{Items: entries(2, 10), Count: 2, Truncated: true,
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
			var a events.ListAnswer
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
// a listing is answered 503 with Retry-After at once; a bad one still
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
	var b events.ErrorBody
	json.Unmarshal(rec.Body.Bytes(), &b)
	if rec.Code != http.StatusServiceUnavailable || b.Error.Code != events.EUnavailable || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("third listing: %d %s Retry-After %q, want 503 %s with Retry-After 1", rec.Code, rec.Body.String(), rec.Header().Get("Retry-After"), events.EUnavailable)
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
