package service

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestPprofServesAndStops: with an address the part serves the pprof
// index there and returns once its context ends; without one there is no
// part.
func TestPprofServesAndStops(t *testing.T) {
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	if p, err := Pprof("", HTTPLimits{}, log); p != nil || err != nil {
		t.Fatalf("empty address: part %v, err %v; want neither", p != nil, err)
	}
	parts, err := WithPprof("127.0.0.1:0", HTTPLimits{}, log)
	if err != nil || len(parts) != 1 {
		t.Fatalf("WithPprof: %d parts, %v", len(parts), err)
	}
	_, addr, _ := strings.Cut(logged.String(), "addr=")
	addr = strings.TrimSpace(addr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- parts[0](ctx) }()
	resp, err := http.Get("http://" + addr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("GET /debug/pprof/: %d %q", resp.StatusCode, body)
	}
	resp, err = http.Get("http://" + addr + "/debug/pprof/trace?seconds=0.05")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "go 1.") {
		t.Fatalf("GET /debug/pprof/trace: %d %.40q", resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("part returned %v after its context ended", err)
	}
}
