package client_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
)

// tlsServer serves a GET of any key as version 1 over HTTPS, with a
// certificate of its own test CA, which it writes to a PEM file.
func tlsServer(t *testing.T) (srv *httptest.Server, caFile string) {
	t.Helper()
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"key":"` + strings.TrimPrefix(r.URL.Path, "/v1/kv/") + `","version":1,"value":1}`))
	}))
	t.Cleanup(srv.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, caFile
}

// TestTLS: an https:// base URL works with the server's CA given as a
// file (WithCAFile) or a *tls.Config (WithTLSConfig, also with
// WithHTTPClient given after it); without it the call fails at once
// (not retried) with the x509 error; an unreadable CA file fails every
// call naming the file.
func TestTLS(t *testing.T) {
	srv, caFile := tlsServer(t)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	for name, opts := range map[string][]client.Option{
		"CA file trusted":           {client.WithCAFile(caFile)},
		"TLS config trusted":        {client.WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})},
		"TLS config on HTTP client": {client.WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}), client.WithHTTPClient(&http.Client{Timeout: time.Minute})},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := client.New(srv.URL, testToken, opts...).Get(t.Context(), scope+"x")
			if err != nil || e.Version != 1 {
				t.Fatalf("Get over https: %+v, %v", e, err)
			}
		})
	}
	t.Run("unknown authority fails at once", func(t *testing.T) {
		start := time.Now()
		c := client.New(srv.URL, testToken, client.WithRetries(5, time.Second, time.Second))
		_, err := c.Get(t.Context(), scope+"x")
		var ua x509.UnknownAuthorityError
		if !errors.As(err, &ua) || time.Since(start) > 900*time.Millisecond {
			t.Fatalf("Get without the CA: %v after %v, want x509.UnknownAuthorityError at once", err, time.Since(start))
		}
	})
	t.Run("missing CA file fails every call", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "none.pem")
		_, err := client.New(srv.URL, testToken, client.WithCAFile(missing)).Get(t.Context(), scope+"x")
		if err == nil || !strings.Contains(err.Error(), missing) {
			t.Fatalf("Get with a missing CA file: %v, want an error naming it", err)
		}
	})
}
