package service

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eskv/eskv/testenv"
)

// serveTLS serves a 200 over HTTPS with r's certificate (Serve) and runs
// r's reloading (polling every 20ms) until the test ends; it returns the
// address.
func serveTLS(t *testing.T, r *CertReloader) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	reload := func(ctx context.Context) error { return r.Run(ctx, 20*time.Millisecond, nil) }
	go func() {
		done <- Serve(ctx, slog.New(slog.DiscardHandler), "test", HTTP{Listener: ln, Handler: h, TLS: r.ServerConfig()}, reload)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}

// servedSerial dials addr trusting pki's CA, on a new connection, and
// returns the serial number of the certificate it is served.
func servedSerial(t *testing.T, pki *testenv.PKI, addr string) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.Pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// replace writes the files src over dst as a Secret volume update does:
// a new file renamed over the old one.
func replace(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// TestCertReloader: the writer's HTTPS serves the pair of files; when
// both are replaced new connections get the new certificate (its
// serial); a replacement that does not load (a key that is not the
// certificate's) keeps the pair in force, counted once; TLS 1.1 is
// refused.
func TestCertReloader(t *testing.T) {
	pki := testenv.MustPKI(t)
	dir := t.TempDir()
	certFile, keyFile := pki.MustServerCert(t, dir, "served", 100)
	nextCert, nextKey := pki.MustServerCert(t, dir, "next", 101)
	_, otherKey := pki.MustServerCert(t, dir, "other", 102)
	reg := prometheus.NewRegistry()
	r, err := NewCertReloader(certFile, keyFile, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, r)
	if got := servedSerial(t, pki, addr); got != "100" {
		t.Fatalf("served serial %s, want 100", got)
	}

	replace(t, nextCert, certFile)
	replace(t, nextKey, keyFile)
	testenv.WaitFor(t, 30*time.Second, "the new certificate served", func() bool { return servedSerial(t, pki, addr) == "101" })

	// A poll between the two renames may have seen a mismatched pair.
	before := testutil.ToFloat64(r.failures)
	replace(t, otherKey, keyFile) // not the key of the certificate in the file
	testenv.WaitFor(t, 30*time.Second, "the bad pair counted", func() bool { return testutil.ToFloat64(r.failures) == before+1 })
	if got := servedSerial(t, pki, addr); got != "101" {
		t.Fatalf("after a bad pair: served serial %s, want 101 kept", got)
	}
	time.Sleep(100 * time.Millisecond) // several polls
	if n := testutil.ToFloat64(r.failures) - before; n != 1 {
		t.Fatalf("the bad pair counted %v times, want once", n)
	}

	_, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.Pool, MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11})
	if err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("a TLS 1.1 handshake: %v, want refused (protocol version)", err)
	}
}

// TestNewCertReloaderRefuses: a pair that does not load is an error
// naming the files, at start.
func TestNewCertReloaderRefuses(t *testing.T) {
	pki := testenv.MustPKI(t)
	dir := t.TempDir()
	certFile, _ := pki.MustServerCert(t, dir, "a", 10)
	_, otherKey := pki.MustServerCert(t, dir, "b", 11)
	for name, files := range map[string][2]string{
		"mismatched key refused": {certFile, otherKey},
		"missing file refused":   {filepath.Join(dir, "nope.pem"), otherKey},
		"key as cert refused":    {otherKey, otherKey},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewCertReloader(files[0], files[1], nil, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), "TLS") {
				t.Fatalf("err %v, want one naming the TLS files", err)
			}
		})
	}
}
