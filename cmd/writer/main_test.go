package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eskv/eskv/internal/service/servicetest"
	"github.com/eskv/eskv/testenv"
)

func TestHelpListsEnvironment(t *testing.T) {
	servicetest.HelpMentions(t, run, []string{"-h"}, "ESKV_HTTP_ADDR", "ESKV_BROKERS", "ESKV_POSTGRES_URL", "ESKV_PARTITIONS", "ESKV_DEV_TOKEN", "ESKV_TOKENS_FILE", "ESKV_PEER_SECRET", "ESKV_PEER_SECRET_FILE", "ESKV_MAX_VALUE_BYTES", "ESKV_WRITER_ID", "ESKV_REQUEST_ID_WINDOW", "ESKV_REQUEST_ID_AGE", "ESKV_STATE_CACHE_BYTES", "ESKV_REQUEST_TIMEOUT",
		"ESKV_MAX_WATCHES", "ESKV_MAX_WATCHES_PER_PRINCIPAL", "ESKV_WATCH_BUFFER", "ESKV_WATCH_BUFFER_BYTES", "ESKV_WATCH_MEMORY_BYTES", "ESKV_WATCH_STALL_TIMEOUT",
		"ESKV_MAX_CONCURRENT_LISTS", "ESKV_MAX_LISTS_PER_PRINCIPAL", "ESKV_MAX_BODY_BYTES", "ESKV_MAX_BODY_BYTES_PER_PRINCIPAL",
		"ESKV_MAX_WAITERS", "ESKV_MAX_WAITERS_PER_PRINCIPAL",
		"ESKV_KAFKA_TLS", "ESKV_KAFKA_TLS_CA_FILE", "ESKV_KAFKA_TLS_CERT_FILE", "ESKV_KAFKA_TLS_KEY_FILE", "ESKV_KAFKA_TLS_SERVER_NAME",
		"ESKV_KAFKA_TLS_INSECURE_SKIP_VERIFY", "ESKV_KAFKA_INSECURE_DEV", "ESKV_KAFKA_SASL_MECHANISM", "ESKV_KAFKA_SASL_USERNAME", "ESKV_KAFKA_SASL_PASSWORD_FILE",
		"ESKV_TLS_CERT_FILE", "ESKV_TLS_KEY_FILE", "ESKV_TLS_CA_FILE", "ESKV_CORS_ALLOWED_ORIGINS")
}

func TestRefusesToStartWithoutTokens(t *testing.T) {
	setenv(t, map[string]string{"ESKV_DEV_TOKEN": "", "ESKV_TOKENS_FILE": ""})
	err := run(context.Background(), nil, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "ESKV_DEV_TOKEN") {
		t.Fatalf("want an error naming how to configure tokens, got %v", err)
	}
}

// TestRefusesBadTokensFile: the writer does not start on a tokens file
// that fails the strict checks; the error names the file and the entry.
func TestRefusesBadTokensFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	content := `{"tokens":[{"token":"svc-token-0123456789","principal":"eskv-sweeper","grants":[{"prefix":"tenant/a/","rights":["read"]}]}]}`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	setenv(t, map[string]string{"ESKV_DEV_TOKEN": "", "ESKV_TOKENS_FILE": path})
	err := run(context.Background(), nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "token 0 (eskv-sweeper): principal name is reserved") {
		t.Fatalf("run: %v, want an error naming the file and the entry", err)
	}
}

// TestErrBadEnv: a variable the flag does not accept is an error naming
// the variable, never a silent default.
func TestErrBadEnv(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"ESKV_PARTITIONS", "twelve"},
		{"ESKV_PARTITIONS", "0"},
		{"ESKV_CREATE_TOPICS", "maybe"},
		{"ESKV_SWEEP_INTERVAL", "1"},
		{"ESKV_SWEEP_INTERVAL", "0s"},
		{"ESKV_MAX_OVERLAY", "-1"},
		{"ESKV_STATE_CACHE_BYTES", "-1"},
		{"ESKV_STATE_CACHE_BYTES", "64MiB"},
		{"ESKV_MAX_LIST_WAIT", "0s"},
		{"ESKV_REQUEST_TIMEOUT", "0s"},
		{"ESKV_REQUEST_TIMEOUT", "5"},
		{"ESKV_ROUND_GATHER", "-1ms"},
		{"ESKV_ROUND_GATHER", "1s"},
		{"ESKV_LOG_FLUSH", "-1ms"},
		{"ESKV_LOG_FLUSH", "5"},
		{"ESKV_QUEUE_DEDUP_WINDOW", "0s"},
		{"ESKV_QUEUE_DEDUP_WINDOW", "5"},
		{"ESKV_REQUEST_ID_WINDOW", "0"},
		{"ESKV_REQUEST_ID_AGE", "-1s"},
		{"ESKV_REQUEST_ID_AGE", "5"},
		{"ESKV_MAX_VALUE_BYTES", "64k"},
		{"ESKV_LOG_LEVEL", "loud"},
		{"ESKV_KAFKA_SASL_MECHANISM", "scram-sha-1"},
		{"ESKV_KAFKA_TLS_INSECURE_SKIP_VERIFY", "true"},
		{"ESKV_KAFKA_TLS_CERT_FILE", "/nonexistent/cert.pem"},
		{"ESKV_KAFKA_SASL_USERNAME", "someone"},
		{"ESKV_MAX_WATCHES_PER_PRINCIPAL", "-1"},
		{"ESKV_WATCH_BUFFER_BYTES", "1024"},
		{"ESKV_WATCH_BUFFER_BYTES", "1MiB"},
		{"ESKV_WATCH_MEMORY_BYTES", "1048576"},
		{"ESKV_WATCH_STALL_TIMEOUT", "0s"},
		{"ESKV_MAX_LISTS_PER_PRINCIPAL", "0"},
		{"ESKV_MAX_WAITERS_PER_PRINCIPAL", "0"},
		{"ESKV_MAX_BODY_BYTES_PER_PRINCIPAL", "1000000"},
		{"ESKV_MAX_BODY_BYTES", "1000000"},
		{"ESKV_HTTP_MAX_CONNECTIONS_PER_ADDRESS", "0"},
		{"ESKV_TLS_CERT_FILE", "/nonexistent/cert.pem"},
		{"ESKV_TLS_KEY_FILE", "/nonexistent/key.pem"},
		{"ESKV_CORS_ALLOWED_ORIGINS", "*"},
		{"ESKV_CORS_ALLOWED_ORIGINS", "https://app.example.com,https://*.example.com"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			setenv(t, map[string]string{tc.name: tc.value, "ESKV_DEV_TOKEN": "t"})
			err := run(context.Background(), nil, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.name) {
				t.Fatalf("run with %s=%s: %v, want an error naming %s", tc.name, tc.value, err, tc.name)
			}
		})
	}
}

// TestParseEnv: variables set the flags the command line does not set.
func TestParseEnv(t *testing.T) {
	setenv(t, map[string]string{"ESKV_CREATE_TOPICS": "TRUE", "ESKV_PARTITIONS": "twelve", "ESKV_WRITER_ID": "w7", "ESKV_SWEEP_INTERVAL": "-1s"})
	c, err := parse([]string{"-partitions", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.createTopics || c.kafka.Partitions != 3 || c.instanceID != "w7" || c.sweepInterval != -time.Second {
		t.Fatalf("parsed %+v", c)
	}
	if c, err = parse(nil, io.Discard); err == nil || c != nil {
		t.Fatalf("ESKV_PARTITIONS=twelve without -partitions: %v", err)
	}
}

func setenv(tb testing.TB, env map[string]string) {
	for k, v := range env {
		tb.Setenv(k, v)
	}
}

// TestServesAndStops runs the writer in-process against a real broker and
// database: it becomes ready, answers a write, and stops cleanly when its
// context ends.
func TestServesAndStops(t *testing.T) {
	servePutStop(t, testenv.MustBroker(t, 2), nil, nil)
}

// TestMetricsOnTheirOwnAddress: with ESKV_METRICS_ADDR and
// ESKV_METRICS_TOKEN, /metrics is served on that address only, and only
// to requests bearing the token (neither without one nor with an API
// token); the API's address answers it 404.
func TestMetricsOnTheirOwnAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const metricsToken = "metrics-token-0123456789"
	get := func(url, token string) (int, string) {
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	apiMetrics := servePutStop(t, testenv.MustBroker(t, 2), map[string]string{"ESKV_METRICS_ADDR": addr, "ESKV_METRICS_TOKEN": metricsToken}, func(string) {
		for _, tc := range []struct {
			token string
			want  int
		}{{"", http.StatusUnauthorized}, {"dev-token-for-main-test", http.StatusUnauthorized}, {metricsToken, http.StatusOK}} {
			code, body := get("http://"+addr+"/metrics", tc.token)
			if code != tc.want || code == http.StatusOK && !strings.Contains(body, `eskv_http_request_seconds_count{method="PUT"`) {
				t.Errorf("GET /metrics on ESKV_METRICS_ADDR with token %q: %d %.200s, want %d", tc.token, code, body, tc.want)
			}
		}
	})
	if !strings.Contains(apiMetrics, `"code":"not_found"`) {
		t.Errorf("GET /metrics on the API's address: %.200s, want 404", apiMetrics)
	}
}

// TestServesOverSecuredKafka: with the ESKV_KAFKA_* settings (TLS with
// a private CA, SASL PLAIN, the password in ESKV_KAFKA_SASL_PASSWORD)
// the writer serves a write through a broker that requires them, and
// serves its Kafka clients' metrics; without SASL it stops at start with
// the broker's refusal.
func TestServesOverSecuredKafka(t *testing.T) {
	sb := testenv.MustSecureBroker(t, 2, false)
	tlsOnly := map[string]string{"ESKV_KAFKA_TLS_CA_FILE": sb.PKI.CAFile, "ESKV_KAFKA_TLS_SERVER_NAME": sb.Settings.TLS.ServerName}
	t.Run("RefusedWithoutSASL", func(t *testing.T) {
		setenv(t, map[string]string{
			"ESKV_HTTP_ADDR": "127.0.0.1:0", "ESKV_BROKERS": strings.Join(sb.Addrs, ","), "ESKV_PARTITIONS": "2",
			"ESKV_POSTGRES_URL": testenv.MustPostgresDB(t).URL, "ESKV_DEV_TOKEN": "dev-token-for-main-test", "ESKV_LOG_LEVEL": "error",
		})
		setenv(t, tlsOnly)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := run(ctx, nil, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "SASL") {
			t.Fatalf("writer without SASL: %v, want the broker's refusal", err)
		}
	})
	tlsOnly["ESKV_KAFKA_SASL_MECHANISM"], tlsOnly["ESKV_KAFKA_SASL_USERNAME"] = "plain", testenv.SecurePlainUser
	tlsOnly["ESKV_KAFKA_SASL_PASSWORD"] = testenv.SecurePassword
	metrics := servePutStop(t, sb.Broker, tlsOnly, nil)
	if !strings.Contains(metrics, "eskv_kafka_writer_producer_") || !strings.Contains(metrics, "eskv_kafka_writer_group_") {
		t.Errorf("/metrics lacks the Kafka clients' metrics:\n%.3000s", metrics)
	}
	// The observability pack's metrics, as the writer process serves them.
	for _, want := range []string{`eskv_build_info{goversion="`, `eskv_pgxpool_acquires_total{pool="projection"}`, `op="put"`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// startWriter runs the writer in-process on b and a database of its own,
// with extra settings over the tests' (a dev token, 2 partitions, writer
// id main-test, warn logs), and waits until it is ready.
func startWriter(t *testing.T, b *testenv.Broker, extra map[string]string) (string, *testenv.Running, *testenv.Postgres) {
	t.Helper()
	pg := testenv.MustPostgresDB(t)
	addrFile := filepath.Join(t.TempDir(), "addr")
	setenv(t, map[string]string{
		"ESKV_HTTP_ADDR":    "127.0.0.1:0",
		"ESKV_ADDR_FILE":    addrFile,
		"ESKV_BROKERS":      strings.Join(b.Addrs, ","),
		"ESKV_POSTGRES_URL": pg.URL,
		"ESKV_PARTITIONS":   "2",
		"ESKV_DEV_TOKEN":    "dev-token-for-main-test",
		"ESKV_WRITER_ID":    "main-test",
		"ESKV_LOG_LEVEL":    "warn",
	})
	setenv(t, extra)
	base, w := servicetest.Start(t, "writer", addrFile, func(ctx context.Context) error {
		return run(ctx, nil, &bytes.Buffer{}, &bytes.Buffer{})
	})
	servicetest.WaitReady(t, base)
	return base, w, pg
}

// servePutStop runs the writer on b with extra settings, answers a
// write, calls during (when set) with its URL, and stops it; it returns
// what its /metrics served meanwhile.
func servePutStop(t *testing.T, b *testenv.Broker, extra map[string]string, during func(base string)) string {
	t.Helper()
	base, w, _ := startWriter(t, b, extra)
	req, _ := http.NewRequest("PUT", base+"/v1/kv/tenant/a/project/b/k", strings.NewReader(`{"value":1}`))
	req.Header.Set("Authorization", "Bearer dev-token-for-main-test")
	r, err := http.DefaultClient.Do(req)
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("put: %v %v", r, err)
	}
	r.Body.Close()
	if during != nil {
		during(base)
	}
	_, metrics := servicetest.Get(base + "/metrics")
	if err := w.Stop(t); err != nil {
		t.Fatalf("run returned %v after cancel", err)
	}
	return metrics
}

// TestRefusesUnspecifiedAdvertiseHost: a writer whose advertise URL other
// writers could not reach it at does not start, and the error names
// ESKV_ADVERTISE_URL, the setting to fix (issue 15: writers that recorded
// http://[::]:8080 forwarded to themselves forever).
// TestRefusesBadPeerSecret: a peer secret that is short, given twice or
// unreadable stops the writer at start with an error naming the setting
// and never showing the secret.
func TestRefusesBadPeerSecret(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("  secret-in-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, secret, file, want string }{
		{"ErrShort", "secret-too-short", "", "at least 32"},
		{"ErrShortFile", "", short, "at least 32"},
		{"ErrBoth", strings.Repeat("s", 64), short, "both set"},
		{"ErrNoFile", "", filepath.Join(dir, "none"), "ESKV_PEER_SECRET_FILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setenv(t, map[string]string{"ESKV_DEV_TOKEN": "dev-token-for-main-test", "ESKV_HTTP_ADDR": "127.0.0.1:0",
				"ESKV_PEER_SECRET": tc.secret, "ESKV_PEER_SECRET_FILE": tc.file})
			err := run(context.Background(), nil, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ESKV_PEER_SECRET") ||
				strings.Contains(err.Error(), "secret-") {
				t.Fatalf("run: %v; want an error naming ESKV_PEER_SECRET, saying %q, without the secret", err, tc.want)
			}
		})
	}
}

// TestRefusesBadTLS: a certificate and key that do not load, or a CA
// file without a certificate, stop the writer at start with an error
// naming the setting and saying why.
func TestRefusesBadTLS(t *testing.T) {
	pki := testenv.MustPKI(t)
	dir := t.TempDir()
	certFile, _ := pki.MustServerCert(t, dir, "a", 10)
	_, otherKey := pki.MustServerCert(t, dir, "b", 11)
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"mismatched pair refused", map[string]string{"ESKV_TLS_CERT_FILE": certFile, "ESKV_TLS_KEY_FILE": otherKey}, "private key does not match public key"},
		{"missing key file refused", map[string]string{"ESKV_TLS_CERT_FILE": certFile, "ESKV_TLS_KEY_FILE": filepath.Join(dir, "none")}, "no such file"},
		{"CA file without certificate refused", map[string]string{"ESKV_TLS_CA_FILE": otherKey}, "ESKV_TLS_CA_FILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setenv(t, map[string]string{"ESKV_DEV_TOKEN": "dev-token-for-main-test", "ESKV_HTTP_ADDR": "127.0.0.1:0"})
			setenv(t, tc.env)
			err := run(context.Background(), nil, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ESKV_TLS_") {
				t.Fatalf("run: %v, want an error naming the ESKV_TLS_ setting and saying %q", err, tc.want)
			}
		})
	}
}

func TestRefusesUnspecifiedAdvertiseHost(t *testing.T) {
	for _, tc := range []struct{ name, advertise, httpAddr string }{
		{"advertise 0.0.0.0", "http://0.0.0.0:8080", "127.0.0.1:0"},
		{"advertise ::", "http://[::]:8080", "127.0.0.1:0"},
		{"advertise no host", "http://:8080", "127.0.0.1:0"},
		{"advertise not a URL", "10.0.0.7:8080", "127.0.0.1:0"},
		{"unset, listening on 0.0.0.0", "", "0.0.0.0:8080"},
		{"unset, listening on ::", "", "[::]:8080"},
		{"unset, listening on every interface", "", ":8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setenv(t, map[string]string{"ESKV_DEV_TOKEN": "dev-token-for-main-test", "ESKV_ADVERTISE_URL": tc.advertise, "ESKV_HTTP_ADDR": tc.httpAddr})
			err := run(context.Background(), nil, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "ESKV_ADVERTISE_URL") {
				t.Fatalf("run: %v, want an error naming ESKV_ADVERTISE_URL", err)
			}
		})
	}
}

// tokensFile writes a tokens file naming principal app with token tok,
// replacing path atomically (as a Kubernetes Secret volume does).
func writeTokensFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func appTokens(tok string) string {
	return `{"tokens":[{"token":"` + tok + `","principal":"app","grants":[{"prefix":"tenant/a/","rights":["read","write"]}]}]}`
}

// startWithTokens runs the writer in-process with the tokens file path,
// polled every poll; it returns its base URL and its log.
func startWithTokens(t *testing.T, path, poll string) (string, *testenv.Buffer) {
	t.Helper()
	b := testenv.MustBroker(t, 2)
	pg := testenv.MustPostgresDB(t)
	addrFile := filepath.Join(t.TempDir(), "addr")
	setenv(t, map[string]string{
		"ESKV_HTTP_ADDR": "127.0.0.1:0", "ESKV_ADDR_FILE": addrFile, "ESKV_BROKERS": strings.Join(b.Addrs, ","),
		"ESKV_POSTGRES_URL": pg.URL, "ESKV_PARTITIONS": "2", "ESKV_DEV_TOKEN": "", "ESKV_TOKENS_FILE": path,
		"ESKV_TOKENS_POLL": poll, "ESKV_WRITER_ID": "tokens-test", "ESKV_LOG_LEVEL": "info",
	})
	logs := &testenv.Buffer{}
	base, _ := servicetest.Start(t, "writer", addrFile, func(ctx context.Context) error {
		return run(ctx, nil, io.Discard, logs)
	})
	servicetest.WaitReady(t, base)
	return base, logs
}

// authStatus is the status of a read of a key that does not exist with
// token tok: 404 when the token is accepted, 401 when not.
func authStatus(t *testing.T, base, tok string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/kv/tenant/a/project/b/k", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return r.StatusCode
}

func metric(t *testing.T, base, name string) string {
	t.Helper()
	_, body := servicetest.Get(base + "/metrics")
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// TestTokensReloadWhenTheFileChanges: a token rotated in the tokens file
// takes effect without a restart (the new token is accepted, the old one
// answered 401); a file that does not load afterwards keeps the tokens in
// force, logs why and counts the failure.
func TestTokensReloadWhenTheFileChanges(t *testing.T) {
	const oldTok, newTok = "old-token-0123456789", "new-token-0123456789"
	path := filepath.Join(t.TempDir(), "tokens.json")
	writeTokensFile(t, path, appTokens(oldTok))
	base, logs := startWithTokens(t, path, "50ms")
	if got := authStatus(t, base, oldTok); got != http.StatusNotFound {
		t.Fatalf("old token before the rotation: %d, want 404", got)
	}
	writeTokensFile(t, path, appTokens(newTok))
	testenv.WaitFor(t, servicetest.Timeout, "the new token accepted", func() bool { return authStatus(t, base, newTok) == http.StatusNotFound })
	if got := authStatus(t, base, oldTok); got != http.StatusUnauthorized {
		t.Fatalf("old token after the rotation: %d, want 401", got)
	}
	if !strings.Contains(logs.String(), `"msg":"tokens file reloaded","service":"writer","trigger":"changed"`) {
		t.Errorf("no reload line in the log:\n%s", logs.String())
	}

	// A bad file (a token too short) keeps the new token in force.
	writeTokensFile(t, path, appTokens("short"))
	testenv.WaitFor(t, servicetest.Timeout, "the failed reload counted", func() bool { return metric(t, base, "eskv_tokens_reload_failures_total") == "1" })
	if got := authStatus(t, base, newTok); got != http.StatusNotFound {
		t.Fatalf("new token after a bad file: %d, want 404 (the tokens in force are kept)", got)
	}
	if !strings.Contains(logs.String(), `"msg":"tokens file not reloaded: the tokens loaded before stay in force"`) ||
		!strings.Contains(logs.String(), "token 0 (app): tokens must be at least 16 characters") {
		t.Errorf("the log does not say why the file was refused:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), newTok) || strings.Contains(logs.String(), oldTok) {
		t.Errorf("a token is in the log:\n%s", logs.String())
	}
	if metric(t, base, "eskv_tokens_loaded") != "1" || metric(t, base, "eskv_tokens_last_load_timestamp_seconds") == "" {
		t.Errorf("eskv_tokens_loaded %q, eskv_tokens_last_load_timestamp_seconds %q", metric(t, base, "eskv_tokens_loaded"), metric(t, base, "eskv_tokens_last_load_timestamp_seconds"))
	}
}

// TestTokensReloadOnSIGHUP: with a poll too slow to matter, SIGHUP
// reloads the tokens file at once.
func TestTokensReloadOnSIGHUP(t *testing.T) {
	const oldTok, newTok = "old-token-0123456789", "new-token-0123456789"
	path := filepath.Join(t.TempDir(), "tokens.json")
	writeTokensFile(t, path, appTokens(oldTok))
	base, logs := startWithTokens(t, path, "1h")
	writeTokensFile(t, path, appTokens(newTok))
	if got := authStatus(t, base, newTok); got != http.StatusUnauthorized {
		t.Fatalf("new token before SIGHUP: %d, want 401", got)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, servicetest.Timeout, "the new token accepted after SIGHUP", func() bool { return authStatus(t, base, newTok) == http.StatusNotFound })
	if got := authStatus(t, base, oldTok); got != http.StatusUnauthorized {
		t.Fatalf("old token after SIGHUP: %d, want 401", got)
	}
	if !strings.Contains(logs.String(), `"trigger":"signal"`) {
		t.Errorf("no reload by signal in the log:\n%s", logs.String())
	}
}

// TestRefusesSessionTimeoutTheBrokersRefuse: a session timeout below the
// brokers' group.min.session.timeout.ms (6s, Kafka's default, on the
// tests' broker) stops the writer at start with an error naming the
// setting and a Solution line naming the brokers', instead of a writer
// that never joins its group.
func TestRefusesSessionTimeoutTheBrokersRefuse(t *testing.T) {
	b := testenv.MustBroker(t, 2)
	pg := testenv.MustPostgresDB(t)
	setenv(t, map[string]string{"ESKV_HTTP_ADDR": "127.0.0.1:0", "ESKV_BROKERS": strings.Join(b.Addrs, ","), "ESKV_POSTGRES_URL": pg.URL,
		"ESKV_PARTITIONS": "2", "ESKV_DEV_TOKEN": "dev-token-for-main-test", "ESKV_LOG_LEVEL": "warn", "ESKV_KAFKA_SESSION_TIMEOUT": "2s"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "ESKV_KAFKA_SESSION_TIMEOUT") ||
		!strings.Contains(err.Error(), "Solution: set group.min.session.timeout.ms=2000") {
		t.Fatalf("run: %v; want a refusal naming ESKV_KAFKA_SESSION_TIMEOUT with the brokers' setting to change", err)
	}
}

// TestServeWhilePostgresDoesNotAnswer: a writer started while its
// projection's database does not answer (nothing listens at its
// address) answers meanwhile: /healthz 200, /readyz 503 (starting), an
// API request 503 partition_unavailable, so that no probe restarts it and no
// client waits on a listener nobody accepts on; it serves once the
// database answers.
func TestServeWhilePostgresDoesNotAnswer(t *testing.T) {
	b := testenv.MustBroker(t, 1)
	pg := testenv.MustPostgresDB(t)
	pgURL, err := url.Parse(pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	var openPG func()
	pgURL.Host, openPG = testenv.ForwardWhen(t, pgURL.Host)
	addrFile := filepath.Join(t.TempDir(), "addr")
	setenv(t, map[string]string{
		"ESKV_HTTP_ADDR": "127.0.0.1:0", "ESKV_ADDR_FILE": addrFile, "ESKV_BROKERS": strings.Join(b.Addrs, ","),
		"ESKV_POSTGRES_URL": pgURL.String(), "ESKV_PARTITIONS": "1", "ESKV_WRITER_ID": "starting-test", "ESKV_LOG_LEVEL": "info", "ESKV_DEV_TOKEN": "starting-test-token-0123",
	})
	logs := &testenv.Buffer{}
	base, _ := servicetest.Start(t, "writer", addrFile, func(ctx context.Context) error {
		return run(ctx, nil, io.Discard, logs)
	})
	servicetest.WaitStarting(t, base, logs, "the projection database does not answer; trying again", "/v1/kv/tenant/a/project/b/k")
	openPG()
	servicetest.WaitReady(t, base)
}
