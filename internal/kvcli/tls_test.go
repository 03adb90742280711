package kvcli

import (
	"bytes"
	"crypto/tls"
	"os"
	"strings"
	"testing"

	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/testenv/stack"
)

// TestCACert: against a writer serving HTTPS with a private CA's
// certificate, kvctl without the CA exits 3 saying the certificate is
// signed by an unknown authority with a Solution line naming --cacert;
// with --cacert, KVCTL_CACERT or a kvstore profile's cacert it works; a
// --cacert that holds no certificate exits 2 naming it.
func TestCACert(t *testing.T) {
	t.Parallel()
	pki := testenv.MustPKI(t)
	st := stack.MustRun(t, stack.TLS(&tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pki.Server}}))
	if !strings.HasPrefix(st.URL, "https://") {
		t.Fatalf("stack URL %s, want https://", st.URL)
	}
	env := map[string]string{"KVCTL_URL": st.URL, "KVCTL_TOKEN": stack.DevToken, "HOME": t.TempDir()}
	run := func(t *testing.T, flavor Flavor, extra map[string]string, args ...string) (int, string, string) {
		t.Helper()
		getenv := func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return env[k]
		}
		var out, errs bytes.Buffer
		code := Run(t.Context(), args, getenv, Stdio{In: strings.NewReader(""), Out: &out, Err: &errs}, flavor)
		return code, out.String(), errs.String()
	}
	kvctl := Flavor{Name: "kvctl"}
	if code, out, errs := run(t, kvctl, nil, "set", key, "1", "--timeout", "20s"); code != exitServer ||
		!strings.Contains(errs, "x509: certificate signed by unknown authority") || !strings.Contains(errs, "Solution:") || !strings.Contains(errs, "--cacert") {
		t.Fatalf("set without the CA: exit %d, stdout %q, stderr %q; want 3, the x509 error and a Solution naming --cacert", code, out, errs)
	}
	t.Run("cacert flag trusted", func(t *testing.T) {
		if code, _, errs := run(t, kvctl, nil, "set", key, "1", "--cacert", pki.CAFile); code != exitOK {
			t.Fatalf("set --cacert: exit %d: %s", code, errs)
		}
	})
	t.Run("KVCTL_CACERT trusted", func(t *testing.T) {
		if code, out, errs := run(t, kvctl, map[string]string{"KVCTL_CACERT": pki.CAFile}, "get", key, "-o", "value"); code != exitOK || strings.TrimSpace(out) != "1" {
			t.Fatalf("get with KVCTL_CACERT: exit %d, %q: %s", code, out, errs)
		}
	})
	t.Run("kvstore profile cacert trusted", func(t *testing.T) {
		cfg := t.TempDir() + "/kvstore.json"
		writeFile(t, cfg, `{"profiles":{"default":{"url":"`+st.URL+`","cacert":"`+pki.CAFile+`","table":"tenant/acme/project/demo"}}}`)
		if code, out, errs := run(t, Flavor{Name: "kvstore", Seed: true}, map[string]string{"KVSTORE_CONFIG": cfg, "KVCTL_URL": ""}, "get", "greeting"); code != exitOK || !strings.Contains(out, "1") {
			t.Fatalf("kvstore get with a profile's cacert: exit %d, %q: %s", code, out, errs)
		}
	})
	t.Run("cacert without certificate refused", func(t *testing.T) {
		notPEM := t.TempDir() + "/ca.pem"
		writeFile(t, notPEM, "not a certificate")
		if code, _, errs := run(t, kvctl, nil, "get", key, "--cacert", notPEM); code != exitUsage || !strings.Contains(errs, notPEM) {
			t.Fatalf("get --cacert %s: exit %d: %s, want 2 naming the file", notPEM, code, errs)
		}
	})
}

// writeFile writes content to path.
func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
}
