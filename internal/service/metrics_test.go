package service

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestServeMetricsToken: ServeMetrics serves /metrics on an address of
// its own, and with a token only to requests bearing it; without an
// address there is no part.
func TestServeMetricsToken(t *testing.T) {
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	if p, err := ServeMetrics("", HTTPLimits{}, nil, log); p != nil || err != nil {
		t.Fatalf("empty address: part %v, err %v; want neither", p != nil, err)
	}
	const token = "metrics-token-0123456789"
	part, err := ServeMetrics("127.0.0.1:0", HTTPLimits{}, MetricsHandler(NewRegistry(), token), log)
	if err != nil {
		t.Fatal(err)
	}
	_, addr, _ := strings.Cut(logged.String(), "addr=")
	addr = strings.TrimSpace(addr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- part(ctx) }()
	for _, tc := range []struct {
		auth string
		want int
	}{{"", http.StatusUnauthorized}, {"Bearer nope", http.StatusUnauthorized}, {"Basic " + token, http.StatusUnauthorized}, {"bearer " + token, http.StatusOK}} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || (resp.StatusCode == http.StatusOK) != strings.Contains(string(body), "eskv_build_info") {
			t.Errorf("GET /metrics with %q: %d %.100s, want %d", tc.auth, resp.StatusCode, body, tc.want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("part returned %v after its context ended", err)
	}
}
