package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/internal/service/servicetest"
	"github.com/eskv/eskv/testenv"
)

const testAuditKey = "test:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

func TestHelpListsTheEnvironment(t *testing.T) {
	for cmd, vars := range map[string][]string{
		"serve": {"ESKV_BROKERS", "ESKV_CLICKHOUSE_ADDR", "ESKV_CLICKHOUSE_DATABASE", "ESKV_AUDIT_KEY", "ESKV_AUDIT_KEY_FILE", "ESKV_AUDITOR_ADDR", "ESKV_ALERT_WINDOW", "ESKV_ALERT_THRESHOLD", "ESKV_PARTITIONS",
			"ESKV_KAFKA_TLS", "ESKV_KAFKA_TLS_CA_FILE", "ESKV_KAFKA_TLS_CERT_FILE", "ESKV_KAFKA_TLS_KEY_FILE", "ESKV_KAFKA_TLS_SERVER_NAME",
			"ESKV_KAFKA_SASL_MECHANISM", "ESKV_KAFKA_SASL_USERNAME", "ESKV_KAFKA_SASL_PASSWORD_FILE",
			"ESKV_CLICKHOUSE_TLS", "ESKV_CLICKHOUSE_TLS_CA_FILE", "ESKV_CLICKHOUSE_PASSWORD_FILE"},
		"verify": {"ESKV_BROKERS", "ESKV_CLICKHOUSE_ADDR", "ESKV_AUDIT_KEY_FILE", "ESKV_AUDITOR_GROUP"},
		"report": {"ESKV_CLICKHOUSE_ADDR", "ESKV_CLICKHOUSE_DATABASE"},
	} {
		servicetest.HelpMentions(t, run, []string{cmd, "-h"}, vars...)
	}
}

func TestErrNoCommand(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(context.Background(), nil, io.Discard, &stderr); err == nil || !strings.Contains(stderr.String(), "serve") {
		t.Fatalf("run without a command: %v\n%s", err, stderr.String())
	}
}

// TestErrBadEnv: a variable the flag does not accept is an error naming
// the variable, never a silent default, in every command.
func TestErrBadEnv(t *testing.T) {
	for _, tc := range []struct {
		command, name, value string
	}{
		{"serve", "ESKV_PARTITIONS", "twelve"},
		{"serve", "ESKV_PARTITIONS", "0"},
		{"serve", "ESKV_AUDITOR_LINGER", "100"},
		{"serve", "ESKV_AUDITOR_MAX_BATCH", "lots"},
		{"serve", "ESKV_AUDITOR_MAX_BATCH", "0"},
		{"serve", "ESKV_AUDITOR_LINGER", "0s"},
		{"serve", "ESKV_ALERT_INTERVAL", "0s"},
		{"serve", "ESKV_ALERT_WINDOW", "5"},
		{"serve", "ESKV_ALERT_THRESHOLD", "10%"},
		{"serve", "ESKV_ALERT_MIN_ATTEMPTS", "-1"},
		{"serve", "ESKV_AUDIT_INSECURE_DEV_KEY", "yes"},
		{"serve", "ESKV_LOG_LEVEL", "loud"},
		{"verify", "ESKV_PARTITIONS", "twelve"},
		{"report", "ESKV_REPORT_JSON", "yes"},
		{"prove", "ESKV_LOG_LEVEL", "loud"},
		{"serve", "ESKV_CLICKHOUSE_TLS_INSECURE_SKIP_VERIFY", "true"},
		{"report", "ESKV_CLICKHOUSE_TLS_CA_FILE", "/nonexistent/ca.pem"},
		{"report", "ESKV_CLICKHOUSE_PASSWORD_FILE", "/nonexistent/password"},
		{"verify", "ESKV_KAFKA_SASL_MECHANISM", "kerberos"},
		{"serve", "ESKV_KAFKA_TLS_INSECURE_SKIP_VERIFY", "true"},
	} {
		t.Run(tc.command+"/"+tc.name+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			err := run(context.Background(), []string{tc.command}, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.name) {
				t.Fatalf("%s with %s=%s: %v, want an error naming %s", tc.command, tc.name, tc.value, err, tc.name)
			}
		})
	}
}

func setenv(tb testing.TB, env map[string]string) {
	for k, v := range env {
		tb.Setenv(k, v)
	}
}

// TestClickHouseTLSAndPasswordFile: with ESKV_CLICKHOUSE_TLS the auditor
// speaks TLS (the test server's plaintext port refuses the handshake),
// and ESKV_CLICKHOUSE_PASSWORD_FILE's password is the one sent (a wrong
// one is refused); neither error shows the password. A ClickHouse that
// serves TLS was not available here: see README, Production.
func TestClickHouseTLSAndPasswordFile(t *testing.T) {
	ch := testenv.MustClickHouse(t)
	setenv(t, map[string]string{"ESKV_CLICKHOUSE_ADDR": ch.Addr, "ESKV_CLICKHOUSE_DATABASE": ch.Database})
	if err := run(context.Background(), []string{"report"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("report over plaintext: %v", err)
	}
	pki := testenv.MustPKI(t)
	t.Run("TLS", func(t *testing.T) {
		setenv(t, map[string]string{"ESKV_CLICKHOUSE_TLS": "true", "ESKV_CLICKHOUSE_TLS_CA_FILE": pki.CAFile})
		err := run(context.Background(), []string{"report"}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "tls") {
			t.Fatalf("report with TLS to a plaintext port: %v, want a TLS handshake failure", err)
		}
	})
	t.Run("PasswordFile", func(t *testing.T) {
		const wrong = "not-the-clickhouse-password"
		file := filepath.Join(t.TempDir(), "ch-password")
		if err := os.WriteFile(file, []byte(wrong+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		setenv(t, map[string]string{"ESKV_CLICKHOUSE_PASSWORD_FILE": file})
		err := run(context.Background(), []string{"report"}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "wrong password") || strings.Contains(err.Error(), wrong) {
			t.Fatalf("report with a wrong password from the file: %v, want an authentication failure without the password", err)
		}
	})
}

// TestErrServeWithoutKey: serve refuses to start without an audit key, and
// says how to give one.
func TestErrServeWithoutKey(t *testing.T) {
	t.Chdir(t.TempDir()) // no .eskv/audit-key here
	setenv(t, map[string]string{"ESKV_AUDIT_KEY": "", "ESKV_AUDIT_KEY_FILE": "", "ESKV_AUDIT_INSECURE_DEV_KEY": ""})
	err := run(context.Background(), []string{"serve"}, io.Discard, io.Discard)
	if !errors.Is(err, errNoKey) || !strings.Contains(err.Error(), "-insecure-dev-key") {
		t.Fatalf("serve without a key: %v", err)
	}
}

func TestKeyFromDefaultFile(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(".eskv", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(DefaultKeyFile, []byte("# make run's key\n"+testAuditKey+"\nold:"+strings.Repeat("11", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, c := newFlags("t", io.Discard)
	c.getenv = func(string) string { return "" }
	kr, source, err := c.keyring()
	if err != nil {
		t.Fatal(err)
	}
	if kr.Current.ID != "test" || source != DefaultKeyFile {
		t.Fatalf("key %q from %q", kr.Current.ID, source)
	}
	if _, ok := kr.Lookup("old"); !ok {
		t.Fatal("older key of the file not loaded")
	}
}

// TestServeVerifyReport runs serve against a broker and a fresh ClickHouse
// database, then verify and report against what it wrote.
func TestServeVerifyReport(t *testing.T) {
	b := testenv.MustBroker(t, 3)
	ch := testenv.MustClickHouse(t)
	addrFile := filepath.Join(t.TempDir(), "addr")
	env := map[string]string{
		"ESKV_BROKERS":             strings.Join(b.Addrs, ","),
		"ESKV_PARTITIONS":          "3",
		"ESKV_CLICKHOUSE_ADDR":     ch.Addr,
		"ESKV_CLICKHOUSE_DATABASE": ch.Database,
		"ESKV_AUDIT_KEY":           strings.TrimPrefix(testAuditKey, "test:"),
		"ESKV_AUDIT_KEY_ID":        "test",
		"ESKV_AUDITOR_ADDR":        "127.0.0.1:0",
		"ESKV_AUDITOR_ADDR_FILE":   addrFile,
		"ESKV_AUDITOR_LINGER":      "10ms",
	}
	setenv(t, env)
	var logs testenv.Buffer
	base, r := servicetest.Start(t, "serve", addrFile, func(ctx context.Context) error {
		return run(ctx, []string{"serve"}, io.Discard, &logs)
	})
	servicetest.WaitReady(t, base)

	now := time.Now().UTC().Truncate(time.Microsecond)
	e1 := contract.Event{SchemaVersion: 1, Key: "tenant/t/project/p/k", Scope: "tenant/t/project/p", Version: 1,
		Kind: contract.KindPut, Op: contract.OpCreate, Before: json.RawMessage("null"), After: json.RawMessage(`{"a":1}`),
		CreatedAt: now, TS: now, Principal: "tester", Semantics: contract.Semantics{Purpose: "config"}}
	e2 := e1
	e2.Version, e2.PrevVersion, e2.Op, e2.Before, e2.After = 2, 1, contract.OpCAS, e1.After, json.RawMessage(`{"a":2}`)
	c := decide.Conflict{SchemaVersion: 1, ID: "c1", Key: e1.Key, Scope: e1.Scope, Op: contract.OpCAS, ExpectedVersion: 1,
		CurrentVersion: 2, Attempted: json.RawMessage(`{"a":3}`), Current: e2.After, Semantics: e1.Semantics,
		Principal: "other", TS: now, Reason: "version_mismatch"}
	testenv.MustProduce(t, b, &e1, &e2, &c)

	store := audit.NewStore(ch.Conn)
	testenv.WaitFor(t, servicetest.Timeout, "2 rows and 1 conflict", func() bool {
		n, err := store.Count(context.Background())
		return err == nil && n.Events == 2 && n.Conflicts == 1
	})
	if code, body := servicetest.Get(base + "/metrics"); code != http.StatusOK || !strings.Contains(body, `eskv_auditor_rows_total{table="audit_events"} 2`) {
		t.Errorf("GET /metrics: %d, rows counter missing:\n%s", code, body)
	}

	t.Run("VerifyOK", func(t *testing.T) {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"verify", "-wait", "20s"}, &out, io.Discard); err != nil {
			t.Fatalf("verify: %v\n%s", err, out.String())
		}
		if !strings.HasPrefix(out.String(), "verify OK (all keys): 2 rows of 1 keys; 2 events") {
			t.Fatalf("verify printed %q", out.String())
		}
		t.Logf("%s", out.String())
	})
	t.Run("ProveOK", func(t *testing.T) {
		// Another formatting of the same JSON value: canonical JSON makes
		// them one.
		var out bytes.Buffer
		err := run(context.Background(), []string{"prove", "-key", e1.Key, "-version", "2", "-value", `{ "a" : 2.0 }`}, &out, io.Discard)
		if err != nil || !strings.Contains(out.String(), "PROVEN: {\"a\":2} was the value of tenant/t/project/p/k at version 2") {
			t.Fatalf("prove: %v\n%s", err, out.String())
		}
		t.Logf("\n%s", out.String())
	})
	t.Run("ErrProveOtherValue", func(t *testing.T) {
		var out bytes.Buffer
		err := run(context.Background(), []string{"prove", "-key", e1.Key, "-version", "2", "-value", `{"a":1}`}, &out, io.Discard)
		if _, ok := errors.AsType[*discrepancyError](err); !ok || !strings.Contains(err.Error(), "value_differs") {
			t.Fatalf("prove of another value: %v\n%s", err, out.String())
		}
		t.Logf("%v", err)
	})
	t.Run("ReportJSON", func(t *testing.T) {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"report", "-json", "-by", "total", "-since", "24h"}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		var rep reportOutput
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		if len(rep.Rates) != 1 || rep.Rates[0].Applied != 2 || rep.Rates[0].Conflicts != 1 || len(rep.TopKeys) != 1 {
			t.Fatalf("report %s", out.String())
		}
	})
	t.Run("ReportTable", func(t *testing.T) {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"report", "-by", "hour"}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "config") || !strings.Contains(out.String(), "33.3%") {
			t.Fatalf("report table:\n%s", out.String())
		}
		t.Logf("\n%s", out.String())
	})
	t.Run("ErrVerifyNamesTheDiscrepancy", func(t *testing.T) {
		if err := ch.Conn.Exec(context.Background(), "ALTER TABLE audit_events UPDATE principal = 'mallory' WHERE version = 1"); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, servicetest.Timeout, "the mutation", func() bool {
			var n uint64
			_ = ch.Conn.QueryRow(context.Background(), "SELECT count() FROM system.mutations WHERE database = currentDatabase() AND is_done = 0").Scan(&n)
			return n == 0
		})
		var out bytes.Buffer
		err := run(context.Background(), []string{"verify"}, &out, io.Discard)
		de, ok := errors.AsType[*discrepancyError](err)
		if !ok || !strings.Contains(err.Error(), "tenant/t/project/p/k@1: row_altered") {
			t.Fatalf("verify: %v\n%s", err, out.String())
		}
		t.Logf("exit %d: %v", exitDiscrepancy, de)
	})

	if err := r.Stop(t); err != nil {
		t.Errorf("serve after cancel: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) || !strings.Contains(logs.String(), `"key_id":"test"`) {
		t.Errorf("log lines missing:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "0001020304") {
		t.Errorf("the audit key is in the log:\n%s", logs.String())
	}
}

// TestServeWaitsForClickHouse: an auditor started while ClickHouse does
// not answer (nothing listens at its address) says it tries again and,
// meanwhile, answers /healthz 200 and /readyz 503 (starting); it serves
// once ClickHouse answers, instead of exiting.
func TestServeWaitsForClickHouse(t *testing.T) {
	b := testenv.MustBroker(t, 1)
	ch := testenv.MustClickHouse(t)
	addrFile := filepath.Join(t.TempDir(), "addr")
	chAddr, openCH := testenv.ForwardWhen(t, ch.Addr)
	setenv(t, map[string]string{
		"ESKV_BROKERS":             strings.Join(b.Addrs, ","),
		"ESKV_PARTITIONS":          "1",
		"ESKV_CLICKHOUSE_ADDR":     chAddr,
		"ESKV_CLICKHOUSE_DATABASE": ch.Database,
		"ESKV_AUDIT_KEY":           strings.TrimPrefix(testAuditKey, "test:"),
		"ESKV_AUDIT_KEY_ID":        "test",
		"ESKV_AUDITOR_ADDR":        "127.0.0.1:0",
		"ESKV_AUDITOR_ADDR_FILE":   addrFile,
	})
	var logs testenv.Buffer
	base, _ := servicetest.Start(t, "serve", addrFile, func(ctx context.Context) error {
		return run(ctx, []string{"serve"}, io.Discard, &logs)
	})
	servicetest.WaitStarting(t, base, &logs, "ClickHouse does not answer; trying again")
	openCH()
	servicetest.WaitReady(t, base)
}
