package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/testenv"
)

func TestHelpListsEnvironment(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, &out, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v", err)
	}
	for _, v := range []string{"ESKV_HTTP_ADDR", "ESKV_BROKERS", "ESKV_POSTGRES_URL", "ESKV_PARTITIONS", "ESKV_DEV_TOKEN", "ESKV_TOKENS_FILE", "ESKV_MAX_VALUE_BYTES", "ESKV_WRITER_ID"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("-h does not mention %s", v)
		}
	}
}

func TestRefusesToStartWithoutTokens(t *testing.T) {
	err := run(context.Background(), nil, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "ESKV_DEV_TOKEN") {
		t.Fatalf("want an error naming how to configure tokens, got %v", err)
	}
}

// TestServesAndStops runs the writer in-process against a real broker and
// database: it becomes ready, answers a write, and stops cleanly when its
// context ends.
func TestServesAndStops(t *testing.T) {
	b := testenv.MustBroker(t, 2)
	pg := testenv.MustPostgresDB(t)
	addrFile := filepath.Join(t.TempDir(), "addr")
	env := map[string]string{
		"ESKV_HTTP_ADDR":    "127.0.0.1:0",
		"ESKV_ADDR_FILE":    addrFile,
		"ESKV_BROKERS":      strings.Join(b.Addrs, ","),
		"ESKV_POSTGRES_URL": pg.URL,
		"ESKV_PARTITIONS":   "2",
		"ESKV_DEV_TOKEN":    "dev-token-for-main-test",
		"ESKV_WRITER_ID":    "main-test",
		"ESKV_LOG_LEVEL":    "warn",
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, nil, func(k string) string { return env[k] }, &bytes.Buffer{}, &bytes.Buffer{})
	}()

	var base string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			base = "http://" + string(b)
			if r, err := http.Get(base + "/readyz"); err == nil {
				r.Body.Close()
				if r.StatusCode == 200 {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("writer did not become ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	req, _ := http.NewRequest("PUT", base+"/v1/kv/tenant/a/project/b/k", strings.NewReader(`{"value":1}`))
	req.Header.Set("Authorization", "Bearer dev-token-for-main-test")
	r, err := http.DefaultClient.Do(req)
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("put: %v %v", r, err)
	}
	r.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v after cancel", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("writer did not stop")
	}
}
