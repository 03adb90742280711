package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/internal/service"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// robustnessConns is how many connections of each kind
// TestConnectionsAreClosed opens: ESKV_ROBUSTNESS_CONNS, 40 by default
// (make bench opens 500 of each against the writer process and measures
// its memory and a normal client's latency meanwhile).
func robustnessConns(tb testing.TB) int {
	tb.Helper()
	v := os.Getenv("ESKV_ROBUSTNESS_CONNS")
	if v == "" {
		return 40
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("ESKV_ROBUSTNESS_CONNS=%q: want a positive count", v)
	}
	return n
}

// TestConnectionsAreClosed: connections that declare a body and never
// send it (with and without a token), idle keep-alives and clients that
// do not read their large listings are all closed by the server within
// its timeouts; a listing page stops at its byte budget; listings beyond
// the concurrency cap are answered 429 at once.
func TestConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	limits := service.HTTPLimits{ReadTimeout: time.Second, WriteTimeout: 2 * time.Second, IdleTimeout: time.Second}
	const pageBytes, lists = 1 << 20, 4
	s := mustStack(t, inproc.HTTPLimits(limits), inproc.API(api.Config{MaxListBytes: pageBytes, MaxConcurrentLists: lists}))
	const prefix = "tenant/acme/project/demo/big/"
	value := `"` + strings.Repeat("v", 60<<10) + `"`
	const n = 40
	for i := range n {
		if r := s.do("PUT", fmt.Sprintf("/v1/kv/%s%03d", prefix, i), devToken, `{"value":`+value+`}`); r.Status != 200 {
			t.Fatalf("put: %d %s", r.Status, r.Body)
		}
	}
	waitProjected(t, s)

	t.Run("OKPagesStopAtTheByteBudget", func(t *testing.T) {
		seen, cursor := 0, ""
		for pages := 1; ; pages++ {
			r := s.do("GET", "/v1/kv?limit=1000&prefix="+prefix+"&cursor="+cursor, devToken, nil)
			var a contract.ListAnswer
			if err := json.Unmarshal(r.Body, &a); err != nil || r.Status != 200 {
				t.Fatalf("list: %d %.200s", r.Status, r.Body)
			}
			if len(r.Body) > pageBytes+64<<10 || a.Count < 1 {
				t.Fatalf("page %d: %d bytes, %d entries; budget %d", pages, len(r.Body), a.Count, pageBytes)
			}
			seen += a.Count
			if !a.Truncated {
				if seen != n || pages < 3 {
					t.Fatalf("%d entries in %d pages, want %d in 3 or more", seen, pages, n)
				}
				return
			}
			cursor = url.QueryEscape(a.NextCursor)
		}
	})

	conns := robustnessConns(t)
	addr := strings.TrimPrefix(s.url, "http://")
	list := "GET /v1/kv?limit=1000&prefix=" + prefix + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + devToken + "\r\n\r\n"
	unsent := func(auth string) string {
		return "PUT /v1/kv/" + prefix + "unsent HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"value\":"
	}
	kinds := []struct {
		name, request string
		stall         time.Duration // how long the client reads nothing
		within        time.Duration // from the request, when the server must have closed
	}{
		{"UnsentBodyWithToken", unsent("Authorization: Bearer " + devToken + "\r\n"), 0, limits.ReadTimeout},
		{"UnsentBodyWithoutToken", unsent(""), 0, limits.ReadTimeout},
		{"IdleKeepAlive", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 0, limits.IdleTimeout},
		{"SlowListingReader", list, limits.WriteTimeout, limits.WriteTimeout + limits.IdleTimeout},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	status := map[string]int{}
	for _, k := range kinds {
		for range conns {
			wg.Go(func() {
				got, err := proc.HoldConn(context.Background(), addr, k.request, k.stall, k.within+5*time.Second)
				if err != nil {
					t.Errorf("%s: %v", k.name, err)
				}
				mu.Lock()
				status[k.name+" "+statusCode(got)]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	t.Logf("first status line per kind: %v", status)
	if status["SlowListingReader 429"] == 0 || status["SlowListingReader 200"] == 0 {
		t.Errorf("slow readers: %v; want pages for some (at most %d at once) and 429 for others", status, lists)
	}
}

// statusCode is the status code of an HTTP/1.1 answer's first bytes, or
// "none".
func statusCode(head string) string {
	if f := strings.Fields(head); len(f) > 1 && strings.HasPrefix(f[0], "HTTP/") {
		return f[1]
	}
	return "none"
}
