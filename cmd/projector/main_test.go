package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/internal/service/servicetest"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

func TestHelpListsTheEnvironment(t *testing.T) {
	servicetest.HelpMentions(t, run, []string{"-h"}, "ESKV_BROKERS", "ESKV_POSTGRES_URL", "ESKV_TOPIC", "ESKV_PARTITIONS", "ESKV_PROJECTOR_ADDR", "ESKV_LOG_LEVEL",
		"ESKV_HISTORY_RETENTION", "ESKV_HISTORY_RETENTION_INTERVAL", "ESKV_HISTORY_FORMAT")
}

// TestErrBadEnv: a variable the flag does not accept is an error naming
// the variable, never a silent default, in every command.
func TestErrBadEnv(t *testing.T) {
	for _, tc := range []struct {
		command     []string
		name, value string
	}{
		{nil, "ESKV_PARTITIONS", "zero"},
		{nil, "ESKV_PARTITIONS", "-3"},
		{nil, "ESKV_PROJECTOR_CHECK_INTERVAL", "30"},
		{nil, "ESKV_PROJECTOR_CHECK_INTERVAL", "0s"},
		{nil, "ESKV_LOG_LEVEL", "loud"},
		{nil, "ESKV_HISTORY_RETENTION", "versions=0"},
		{nil, "ESKV_HISTORY_RETENTION", "age=forever"},
		{nil, "ESKV_HISTORY_RETENTION", "keep=all"},
		{nil, "ESKV_HISTORY_RETENTION_INTERVAL", "0s"},
		{nil, "ESKV_HISTORY_FORMAT", "json"},
		{nil, "ESKV_HISTORY_FORMAT", "TEXT"},
		{[]string{"rebuild", "-into", "x"}, "ESKV_HISTORY_FORMAT", "bytea"},
		{[]string{"rebuild", "-into", "x"}, "ESKV_PARTITIONS", "twelve"},
		{[]string{"diff"}, "ESKV_LOG_LEVEL", "verbose"},
		{nil, "ESKV_KAFKA_SASL_MECHANISM", "gssapi"},
		{[]string{"rebuild", "-into", "x"}, "ESKV_KAFKA_TLS_INSECURE_SKIP_VERIFY", "true"},
		{[]string{"diff"}, "ESKV_KAFKA_TLS_CA_FILE", "/nonexistent/ca.pem"},
	} {
		t.Run(fmt.Sprint(tc.command, tc.name, "=", tc.value), func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			err := run(context.Background(), tc.command, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.name) {
				t.Fatalf("run with %s=%s: %v, want an error naming %s", tc.name, tc.value, err, tc.name)
			}
		})
	}
}

func TestRunProjectsAndServes(t *testing.T) {
	b, pg := mustStack(t, 3)
	addrFile := filepath.Join(t.TempDir(), "addr")
	t.Setenv("ESKV_PROJECTOR_ADDR_FILE", addrFile)
	t.Setenv("ESKV_HISTORY_FORMAT", "jsonb") // the default, text: TestRebuildAndDiff
	var logs testenv.Buffer
	base, r := servicetest.Start(t, "serve", addrFile, func(ctx context.Context) error { return runServe(ctx, &logs) })
	servicetest.WaitReady(t, base)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := servicetest.Get(base + path); code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}

	// One event, produced as a writer does: in a transaction.
	const key = "tenant/t/project/p/k"
	now := time.Now().UTC().Truncate(time.Microsecond)
	e := contract.Event{
		SchemaVersion: contract.SchemaVersion, Key: key, Scope: "tenant/t/project/p", Version: 1,
		Kind: contract.KindPut, Op: contract.OpCreate, After: json.RawMessage(`{"a":1}`),
		CreatedAt: now, TS: now, Principal: "tester", Semantics: contract.Semantics{Purpose: "config"},
	}
	testenv.MustProduce(t, b, &e)
	s := projection.New(pg.Pool)
	testenv.WaitFor(t, servicetest.Timeout, "the event in Postgres", func() bool {
		st, err := s.State(context.Background(), key)
		return err == nil && st.Version == 1
	})
	if got := historyFormats(t, pg, "public"); got != "jsonb" {
		t.Errorf("kv_history rows as %s, want jsonb (ESKV_HISTORY_FORMAT)", got)
	}
	if code, body := servicetest.Get(base + "/metrics"); code != http.StatusOK || !strings.Contains(body, "eskv_projector_events_applied_total 1") {
		t.Errorf("GET /metrics: %d, applied counter missing:\n%s", code, body)
	} else {
		for _, want := range []string{`eskv_build_info{goversion="`, `eskv_pgxpool_total_conns{pool="projection"}`, `eskv_projector_offset_lag{partition="0"`} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	}

	if err := r.Stop(t); err != nil {
		t.Errorf("run after cancel: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"stopped"`) {
		t.Errorf("no JSON 'stopped' log line:\n%s", logs.String())
	}
}

// TestKafkaSettingsFromEnv: the projector's commands reach a broker that
// requires TLS and SASL through the ESKV_KAFKA_* variables (here rebuild
// with SCRAM-SHA-512, the password from a file); without the SASL
// settings rebuild exits 1 with the broker's refusal, without hanging.
func TestKafkaSettingsFromEnv(t *testing.T) {
	sb := testenv.MustSecureBroker(t, 2, false)
	pg := testenv.MustPostgresDB(t)
	pwFile := filepath.Join(t.TempDir(), "kafka-password")
	if err := os.WriteFile(pwFile, []byte(testenv.SecurePassword), 0o600); err != nil {
		t.Fatal(err)
	}
	setenv(t, map[string]string{
		"ESKV_BROKERS": strings.Join(sb.Addrs, ","), "ESKV_POSTGRES_URL": pg.URL, "ESKV_PARTITIONS": "2",
		"ESKV_KAFKA_TLS_CA_FILE": sb.PKI.CAFile, "ESKV_KAFKA_TLS_SERVER_NAME": sb.Settings.TLS.ServerName,
	})
	const key = "tenant/t/project/p/secured"
	now := time.Now().UTC().Truncate(time.Microsecond)
	testenv.MustProduce(t, sb.Broker, &contract.Event{
		SchemaVersion: contract.SchemaVersion, Key: key, Scope: "tenant/t/project/p", Version: 1,
		Kind: contract.KindPut, Op: contract.OpCreate, After: json.RawMessage(`{"a":1}`),
		CreatedAt: now, TS: now, Principal: "tester", Semantics: contract.Semantics{Purpose: "config"},
	})

	_, errs, code := cli(t, "rebuild", "-into", "nosasl")
	if code != 1 || !strings.Contains(errs, "SASL") {
		t.Errorf("rebuild without SASL: exit %d, stderr %q; want 1 and the broker's refusal", code, errs)
	}
	setenv(t, map[string]string{
		"ESKV_KAFKA_SASL_MECHANISM": "scram-sha-512", "ESKV_KAFKA_SASL_USERNAME": testenv.SecureScram512,
		"ESKV_KAFKA_SASL_PASSWORD_FILE": pwFile,
	})
	out, errs, code := cli(t, "rebuild", "-into", "secured")
	if code != 0 || !strings.Contains(out, "1 events read") || !strings.Contains(out, "1 keys") {
		t.Fatalf("rebuild over TLS+SCRAM-SHA-512: exit %d\n%s%s", code, out, errs)
	}
	if strings.Contains(out+errs, testenv.SecurePassword) {
		t.Error("the output shows the SASL password")
	}
}

// cli runs the command in-process and returns its output and exit code.
func cli(tb testing.TB, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := run(ctx, args, &out, &errb)
	code = service.ExitCode("projector", err, &errb)
	return out.String(), errb.String(), code
}

// setenv sets env for the rest of the test.
func setenv(tb testing.TB, env map[string]string) {
	for k, v := range env {
		tb.Setenv(k, v)
	}
}

// produceHistory produces a history per key in committed transactions: puts,
// updates, a delete, an expire and re-creates, across partitions.
func produceHistory(tb testing.TB, b *testenv.Broker) (keys int) {
	tb.Helper()
	p := testenv.MustProducer(tb, b)
	now := time.Now().UTC().Truncate(time.Microsecond)
	exp := now.Add(time.Hour)
	kinds := []contract.Kind{contract.KindPut, contract.KindPut, contract.KindDelete, contract.KindPut, contract.KindExpire, contract.KindPut}
	for s := range 4 {
		var evs []any
		for k := range 5 {
			key := fmt.Sprintf("tenant/t%d/project/p/k%d", s, k)
			for v, kind := range kinds[:1+(k+s)%len(kinds)] {
				e := contract.Event{
					SchemaVersion: contract.SchemaVersion, Key: key, Scope: fmt.Sprintf("tenant/t%d/project/p", s),
					Version: int64(v + 1), PrevVersion: int64(v), Kind: kind, Op: contract.OpSet,
					CreatedAt: now, TS: now.Add(time.Duration(v) * time.Millisecond), Principal: "tester",
					RequestID: fmt.Sprintf("r-%s-%d", key, v), Semantics: contract.Semantics{Purpose: "lock", Producer: "test"},
				}
				switch kind {
				case contract.KindPut:
					e.After = json.RawMessage(fmt.Sprintf(`{"v":%d}`, v+1))
					if v%2 == 1 {
						e.ExpiresAt = &exp
					}
				case contract.KindDelete:
					e.Op = contract.OpDelete
				case contract.KindExpire:
					e.Op = contract.OpExpire
				}
				evs = append(evs, e)
			}
			keys++
		}
		p.Commit(tb, evs...)
	}
	return keys
}

// mustStack returns a broker with a changes topic of partitions
// partitions and a database, and points the commands at them (serve on a
// free port).
func mustStack(tb testing.TB, partitions int32) (*testenv.Broker, *testenv.Postgres) {
	tb.Helper()
	b := testenv.MustBroker(tb, partitions)
	pg := testenv.MustPostgresDB(tb)
	setenv(tb, map[string]string{
		"ESKV_BROKERS":        strings.Join(b.Addrs, ","),
		"ESKV_POSTGRES_URL":   pg.URL,
		"ESKV_PARTITIONS":     fmt.Sprint(partitions),
		"ESKV_PROJECTOR_ADDR": "127.0.0.1:0",
	})
	return b, pg
}

// runServe runs `projector` (serve), logging to stderr, until ctx ends.
func runServe(ctx context.Context, stderr io.Writer) error {
	return run(ctx, nil, io.Discard, stderr)
}

// waitProjected waits for the live projection to reach the end of the
// changes topic.
func waitProjected(tb testing.TB, b *testenv.Broker, pg *testenv.Postgres) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs...))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	want := testenv.EndOffsets(context.Background(), tb, cl, b.Topics.Changes)
	testenv.WaitProjected(tb, servicetest.Timeout, projection.New(pg.Pool), b.Topics.Changes, want)
}

func schemaCount(tb testing.TB, pg *testenv.Postgres, like string) int {
	tb.Helper()
	var n int
	if err := pg.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_namespace WHERE nspname LIKE $1`, like).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

func TestRebuildAndDiff(t *testing.T) {
	b, pg := mustStack(t, 3)
	keys := produceHistory(t, b)
	testenv.RunUntilCleanup(t, "serve", func(ctx context.Context) error { return runServe(ctx, io.Discard) })
	waitProjected(t, b, pg)
	b.Cluster.Compact() // no transaction is open

	t.Run("OKRebuild", func(t *testing.T) {
		out, errs, code := cli(t, "rebuild", "--into", "rebuilt")
		if code != 0 {
			t.Fatalf("rebuild: exit %d\n%s%s", code, out, errs)
		}
		want := fmt.Sprintf(" from 3 partitions (log start to the last stable offsets taken at start), %d keys, in ", keys)
		if !strings.HasPrefix(out, "rebuilt kv.changes into schema rebuilt: ") || !strings.Contains(out, want) {
			t.Errorf("rebuild printed %q, want it to say %q", out, want)
		}
	})
	t.Run("ErrRebuildIntoNonEmpty", func(t *testing.T) {
		_, errs, code := cli(t, "rebuild", "--into", "rebuilt")
		if code != 1 || !strings.Contains(errs, "schema exists and is not empty") || !strings.Contains(errs, "-replace") {
			t.Errorf("rebuild into a rebuilt schema: exit %d, stderr %q; want 1 and a refusal naming -replace", code, errs)
		}
	})
	t.Run("ErrRebuildIntoLive", func(t *testing.T) {
		_, errs, code := cli(t, "rebuild", "--into", "public", "--replace")
		if code != 1 || !strings.Contains(errs, "live projection") {
			t.Errorf("rebuild into public: exit %d, stderr %q; want a refusal", code, errs)
		}
	})
	t.Run("OKRebuildJSONB", func(t *testing.T) {
		// serve wrote text rows (the default); rebuild writes what
		// ESKV_HISTORY_FORMAT says, as serve would, and diff compares
		// the two formats' events.
		t.Setenv("ESKV_HISTORY_FORMAT", "jsonb")
		if out, errs, code := cli(t, "rebuild", "--into", "rebuilt_jsonb"); code != 0 {
			t.Fatalf("rebuild: exit %d\n%s%s", code, out, errs)
		}
		for schema, want := range map[string]string{"public": "text", "rebuilt_jsonb": "jsonb"} {
			if got := historyFormats(t, pg, schema); got != want {
				t.Errorf("%s.kv_history rows as %s, want %s", schema, got, want)
			}
		}
		if out, errs, code := cli(t, "diff", "--schema", "rebuilt_jsonb"); code != 0 || !strings.Contains(out, "result: equal") {
			t.Errorf("diff --schema rebuilt_jsonb: exit %d\n%s%s", code, out, errs)
		}
	})
	t.Run("OKRebuildReplace", func(t *testing.T) {
		if out, errs, code := cli(t, "rebuild", "--into", "rebuilt", "--replace"); code != 0 {
			t.Errorf("rebuild --replace: exit %d\n%s%s", code, out, errs)
		}
	})
	t.Run("OKDiffSchema", func(t *testing.T) {
		out, errs, code := cli(t, "diff", "--schema", "rebuilt")
		if code != 0 || !strings.Contains(out, "result: equal") ||
			!strings.Contains(out, fmt.Sprintf("0 differing keys; %d rows in rebuilt, %d in public", keys, keys)) {
			t.Errorf("diff --schema rebuilt: exit %d\n%s%s", code, out, errs)
		}
	})
	t.Run("OKDiffAgainstTheLog", func(t *testing.T) {
		out, errs, code := cli(t, "diff")
		if code != 0 || !strings.Contains(out, "result: equal") || !strings.Contains(out, "reached the log's last stable offsets taken at start") {
			t.Errorf("diff: exit %d\n%s%s", code, out, errs)
		}
		if n := schemaCount(t, pg, "eskv_diff_%"); n != 0 {
			t.Errorf("%d temporary schemas left behind", n)
		}
	})
	t.Run("Tampered", func(t *testing.T) {
		const key = "tenant/t1/project/p/k2"
		if _, err := pg.Pool.Exec(context.Background(), `UPDATE kv_entries SET value = '{"v":666}' WHERE key = $1`, key); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"diff"}, {"diff", "--schema", "rebuilt"}} {
			out, errs, code := cli(t, args...)
			if code != 1 || !strings.Contains(out, "- "+key+": value differs (version ") || !strings.Contains(out, "result: DIFFERENT (1 key differs)") ||
				!strings.Contains(errs, "1 key differs between ") {
				t.Errorf("%v after tampering %s: exit %d\n%s%s", args, key, code, out, errs)
			}
		}
	})
	t.Run("ErrDiffMissingSchema", func(t *testing.T) {
		if _, errs, code := cli(t, "diff", "--schema", "nosuch"); code != 2 {
			t.Errorf("diff --schema nosuch: exit %d, want 2 (could not compare)\n%s", code, errs)
		}
	})
}

// historyFormats returns the formats of schema's kv_history rows: jsonb,
// text, both ("jsonb,text") or none ("").
func historyFormats(tb testing.TB, pg *testenv.Postgres, schema string) string {
	tb.Helper()
	var formats string
	err := pg.Pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(f, ',' ORDER BY f), '') FROM (
		SELECT DISTINCT CASE WHEN event IS NULL THEN 'text' ELSE 'jsonb' END AS f FROM `+pgx.Identifier{schema, "kv_history"}.Sanitize()+`) h`).Scan(&formats)
	if err != nil {
		tb.Fatal(err)
	}
	return formats
}

func TestDiffSaysTheLiveProjectionTrails(t *testing.T) {
	b, _ := mustStack(t, 2)
	produceHistory(t, b) // no projector runs: the live projection is empty
	out, errs, code := cli(t, "diff", "--wait", "200ms")
	if code != 0 || !strings.Contains(out, "trails the log's last stable offsets taken at start by ") ||
		!strings.Contains(out, "after waiting 200ms; comparing with the log up to its stored offsets") ||
		!strings.Contains(out, "result: equal") {
		t.Errorf("diff: exit %d\n%s%s", code, out, errs)
	}
}

func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"OKHelp", []string{"-h"}, 0, "projector rebuild --into SCHEMA"},
		{"OKRebuildHelp", []string{"rebuild", "-h"}, 0, "-replace"},
		{"OKDiffHelp", []string{"diff", "-h"}, 0, "-against"},
		{"ErrUnknownCommand", []string{"rebuilt"}, 1, `unknown command "rebuilt"`},
		{"ErrRebuildWithoutInto", []string{"rebuild"}, 1, "-into SCHEMA is required"},
		{"ErrRebuildBadSchema", []string{"rebuild", "--into", "Bad-Name", "--postgres-url", testenv.DefaultPostgresURL}, 1, "schema name"},
		{"ErrDiffBadFlag", []string{"diff", "--nope"}, 2, "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := cli(t, tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Errorf("projector %v: exit %d, want %d; stderr does not say %q:\n%s", tc.args, code, tc.code, tc.want, errs)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{nil, 0},
		{flag.ErrHelp, 0},
		{errors.New("boom"), 1},
		{&exitError{code: 2, err: errors.New("could not compare")}, 2},
		{fmt.Errorf("wrapped: %w", &exitError{code: 1, err: errors.New("differ")}), 1},
	} {
		if got := service.ExitCode("projector", tc.err, io.Discard); got != tc.code {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.code)
		}
	}
}

func TestServeStopsOnRecreatedTopic(t *testing.T) {
	b, pg := mustStack(t, 2)
	produceHistory(t, b)
	r := testenv.RunUntilCleanup(t, "serve", func(ctx context.Context) error { return runServe(ctx, io.Discard) })
	waitProjected(t, b, pg)
	if err := r.Stop(t); err != nil {
		t.Fatalf("serve: %v", err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.DeleteTopic(context.Background(), b.Topics.Changes); err != nil {
		t.Fatal(err)
	}
	if err := changelog.Ensure(context.Background(), adm, b.Topics); err != nil {
		t.Fatal(err)
	}
	_, errs, code := cli(t)
	if code != 1 || !strings.Contains(errs, `"level":"ERROR","msg":"changes topic reset detected; stopping: the topic was recreated`) ||
		!strings.Contains(errs, "projector: the changes topic was reset, truncated or recreated: kv.changes: the topic was recreated: its ID is ") {
		t.Errorf("serve on a recreated topic: exit %d\n%s", code, errs)
	}
}
