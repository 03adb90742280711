package kvcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/testenv/stack"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const (
	scope = "tenant/acme/project/demo/"
	key   = scope + "greeting"
)

// kvctlBin is the binary under test, built once per TestCLI.
type kvctlBin struct {
	path string
	env  map[string]string // KVCTL_URL, KVCTL_TOKEN of the stack
	dir  string            // working directory: no .eskv/ in it
}

// mustBuild builds cmd/kvctl into a temporary directory.
func mustBuild(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "kvctl")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/kvctl").CombinedOutput()
	if err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// result is one run of kvctl.
type result struct {
	stdout, stderr string
	code           int
}

// command prepares the binary with args and extra environment (which
// overrides the stack's; an empty value unsets).
func (k *kvctlBin) command(env map[string]string, args ...string) *exec.Cmd {
	cmd := exec.Command(k.path, args...)
	cmd.Dir = k.dir
	vars := map[string]string{}
	for _, kv := range os.Environ() {
		name, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "KVCTL_") && name != "ESKV_DEV_TOKEN" {
			vars[name] = v
		}
	}
	for _, m := range []map[string]string{k.env, env} {
		for name, v := range m {
			vars[name] = v
		}
	}
	for name, v := range vars {
		if v != "" {
			cmd.Env = append(cmd.Env, name+"="+v)
		}
	}
	return cmd
}

// run executes the binary with args, stdin and extra environment.
func (k *kvctlBin) run(tb testing.TB, stdin string, env map[string]string, args ...string) result {
	tb.Helper()
	cmd := k.command(env, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		tb.Fatalf("run kvctl: %v", err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

var (
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	portRE = regexp.MustCompile(`127\.0\.0\.1:\d{5}`) // ephemeral ports: 32768-60999
	// nonceRE is a queue receipt's random part (events.Receipt).
	nonceRE = regexp.MustCompile(`#[0-9a-f]{32}\b`)
	// positionRE is a read's log position (a watch cursor), alone or at
	// the head of a listing's cursor: offsets depend on what ran before.
	positionRE = regexp.MustCompile(`\bp\d+\.o-?\d+\b`)
)

var plainArg = regexp.MustCompile(`^[A-Za-z0-9/._:=-]+$`)

// normalize replaces what changes from run to run: times, UUIDs, queue
// receipts' random parts, log positions and the test servers' ephemeral
// ports.
func normalize(s string) string {
	s = timeRE.ReplaceAllString(s, "<TIME>")
	s = uuidRE.ReplaceAllString(s, "<UUID>")
	s = nonceRE.ReplaceAllString(s, "#<NONCE>")
	s = positionRE.ReplaceAllString(s, "<POSITION>")
	return portRE.ReplaceAllString(s, "127.0.0.1:<PORT>")
}

// golden compares r, normalized, with testdata/<name>.golden (or writes
// it under -update).
func golden(t *testing.T, name string, args []string, r result) {
	t.Helper()
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = a
		if !plainArg.MatchString(a) {
			quoted[i] = "'" + a + "'"
		}
	}
	got := normalize(fmt.Sprintf("$ kvctl %s\n-- exit %d --\n-- stdout --\n%s-- stderr --\n%s", strings.Join(quoted, " "), r.code, r.stdout, r.stderr))
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// fakeServer answers every request with status and body: a server error
// the real stack cannot be made to give on demand.
func fakeServer(tb testing.TB, status int, body string) string {
	tb.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	tb.Cleanup(hs.Close)
	return hs.URL
}

// closedURL is an address nothing listens on.
func closedURL(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

// tc is one golden case of TestCLI: kvctl run with args, stdin and env
// exits with code.
type tc struct {
	name  string
	stdin string
	env   map[string]string
	args  []string
	code  int
}

// TestCLI runs the built kvctl against one in-process stack. The cases
// run in order: later ones see the keys earlier ones wrote.
func TestCLI(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	// KVCTL_FORMAT=text: the goldens pin what a terminal shows (without
	// --format, a pipe gets json; TestSeed pins that default).
	k := &kvctlBin{path: mustBuild(t), env: map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_FORMAT": formatText}, dir: t.TempDir()}
	c := client.New(url, stack.DevToken)
	ctx := t.Context()

	runCases := func(t *testing.T, cases []tc) {
		t.Helper()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := k.run(t, tc.stdin, tc.env, tc.args...)
				if r.code != tc.code {
					t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
				}
				golden(t, tc.name, tc.args, r)
			})
		}
	}

	runCases(t, []tc{
		{name: "set-text", args: []string{"set", key, `{"hello":"world"}`}},
		{name: "set-json", args: []string{"set", key, `{"hello": "json"}`, "--expected-version", "1", "--purpose", "config", "--format", "json"}},
		{name: "set-value", args: []string{"set", key, `{"hello":"value"}`, "--ttl", "1h", "--purpose", "config", "--producer", "golden",
			"--hint", "ops", "--hint", "docs", "--request-id", "g3", "--spec-ref", "adr-1", "-o", "value"}},
		{name: "get-text", args: []string{"get", key}},
		{name: "get-json", args: []string{"get", key, "--format", "json"}},
		{name: "get-value", args: []string{"get", key, "--format", "value"}},
		{name: "set-stdin", stdin: "{\"cursor\": 42}\n", args: []string{"set", scope + "cursor", "-", "--purpose", "cursor"}},
		{name: "set-replay-first", args: []string{"set", scope + "idem", "1", "--request-id", "r1"}},
		{name: "set-replayed", args: []string{"set", scope + "idem", "1", "--request-id", "r1"}},
		{name: "exists-yes", args: []string{"exists", key}},
		{name: "err-exists-no", args: []string{"exists", scope + "missing"}, code: exitFailed},
		{name: "err-not-found", args: []string{"get", scope + "missing"}, code: exitFailed},
		{name: "err-delete-not-found", args: []string{"delete", scope + "missing"}, code: exitFailed},
		{name: "err-conflict", args: []string{"set", key, "1", "--expected-version", "1"}, code: exitFailed},
		{name: "err-conflict-exists", args: []string{"set", key, "1", "--expected-version", "0"}, code: exitFailed},
		{name: "err-conflict-absent", args: []string{"set", scope + "missing", "1", "--expected-version", "2"}, code: exitFailed},
		{name: "err-conflict-request-id", args: []string{"set", scope + "idem", "2", "--request-id", "r1"}, code: exitFailed},
		{name: "err-delete-conflict", args: []string{"delete", key, "--expected-version", "9"}, code: exitFailed},
		{name: "err-value-not-json", args: []string{"set", key, "hello", "--json"}, code: exitUsage},
		{name: "err-no-value", args: []string{"set", key}, code: exitUsage},
		{name: "err-bad-format", args: []string{"get", key, "--format", "yaml"}, code: exitUsage},
		{name: "err-bad-ttl", args: []string{"set", key, "1", "--ttl", "1.5s"}, code: exitUsage},
		{name: "err-bad-key", args: []string{"get", scope + "Greeting"}, code: exitUsage},
		{name: "err-bad-prefix", args: []string{"list", "tenant/acme/"}, code: exitUsage},
		{name: "err-bad-purpose", args: []string{"set", key, "1", "--purpose", "nope"}, code: exitUsage},
		{name: "err-bad-limit", args: []string{"list", scope, "--limit", "5000"}, code: exitUsage},
		{name: "err-unknown-flag", args: []string{"get", key, "--nope"}, code: exitUsage},
		{name: "err-unknown-command", args: []string{"nope"}, code: exitUsage},
		{name: "err-args", args: []string{"get"}, code: exitUsage},
		{name: "err-bad-url", args: []string{"get", key, "--url", "ftp://example"}, code: exitUsage},
		{name: "err-unauthenticated", env: map[string]string{"KVCTL_TOKEN": "not-a-known-token-0000"}, args: []string{"get", key}, code: exitServer},
		{name: "err-no-token", env: map[string]string{"KVCTL_TOKEN": ""}, args: []string{"get", key}, code: exitServer},
		{name: "err-forbidden", args: []string{"set", key, "1", "--token", stack.ReaderToken}, code: exitServer},
		{name: "err-unreachable", args: []string{"get", key, "--url", closedURL(t)}, code: exitServer},
		{name: "err-internal", args: []string{"get", key, "--url", fakeServer(t, 500, `{"error":{"code":"internal","message":"internal error"}}`)}, code: exitServer},
		{name: "err-unavailable", args: []string{"get", key, "--url", fakeServer(t, 503, `{"error":{"code":"partition_unavailable","message":"partition 1 is catching up; retry"}}`)}, code: exitServer},
		{name: "err-not-eskv", args: []string{"get", key, "--url", fakeServer(t, 404, `<html>not here</html>`)}, code: exitServer},
	})

	// Listings read the projection: wait until it holds the jobs.
	for i := range 5 {
		if _, err := c.Put(ctx, client.PutRequest{Key: fmt.Sprintf("%sjobs/%02d", scope, i), Value: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	stack.WaitFor(t, "the projection to hold the jobs", func() bool {
		p, err := c.List(ctx, client.ListOptions{Prefix: scope + "jobs/"})
		return err == nil && len(p.Items) == 5
	})
	runCases(t, []tc{
		{name: "list-page-text", args: []string{"list", scope + "jobs/", "--limit", "2"}},
		{name: "list-page-json", args: []string{"list", scope + "jobs/", "--limit", "2", "--format", "json"}},
		{name: "list-page-value", args: []string{"list", scope + "jobs/", "--limit", "2", "--format", "value"}},
		{name: "list-next-page-text", args: []string{"list", scope + "jobs/", "--limit", "2", "--cursor", "dGVuYW50L2FjbWUvcHJvamVjdC9kZW1vL2pvYnMvMDE"}},
		{name: "list-all-text", args: []string{"list", "--prefix", scope + "jobs/", "--limit", "2", "--all"}},
		{name: "list-all-json", args: []string{"list", scope + "jobs/", "--limit", "2", "--all", "--format", "json"}},
		{name: "list-all-value", args: []string{"list", scope + "jobs/", "--all", "--format", "value"}},
		{name: "list-empty-text", args: []string{"list", scope + "none/"}},
		{name: "list-empty-json", args: []string{"list", scope + "none/", "--format", "json"}},
		{name: "list-where-text", args: []string{"list", scope + "jobs/", "--where", "n gt 2"}},
		{name: "list-where-all-json", args: []string{"list", scope + "jobs/", "--where", "n lte 1", "--limit", "1", "--all", "--format", "json"}},
		{name: "list-where-none-text", args: []string{"list", scope + "jobs/", "--where", "n eq done"}},
		{name: "err-where-op", args: []string{"list", scope + "jobs/", "--where", "n between 1"}, code: exitUsage},
		{name: "err-where-short", args: []string{"list", scope + "jobs/", "--where", "n"}, code: exitUsage},
		{name: "err-where-object", args: []string{"list", scope + "jobs/", "--where", `n eq {"a":1}`}, code: exitUsage},
		{name: "delete-text", args: []string{"delete", scope + "jobs/00"}},
		{name: "delete-json", args: []string{"delete", scope + "jobs/01", "--expected-version", "1", "--format", "json"}},
		{name: "delete-value", args: []string{"delete", scope + "jobs/02", "--request-id", "d2", "--format", "value"}},
		{name: "delete-replayed", args: []string{"delete", scope + "jobs/02", "--request-id", "d2"}},
	})

	// Counters, fields, locks and leaders. Holders are explicit, so the
	// answers do not depend on the user and host running the test.
	if _, err := c.Put(ctx, client.PutRequest{Key: scope + "big", Value: json.RawMessage("9223372036854775807")}); err != nil {
		t.Fatal(err)
	}
	var (
		hits   = scope + "hits"
		task   = scope + "tasks/1"
		lk     = scope + "locks/deploy"
		leader = scope + "leaders/sched"
	)
	runCases(t, []tc{
		{name: "inc-text", args: []string{"inc", hits, "--create"}},
		{name: "inc-json", args: []string{"inc", hits, "--by", "10", "--format", "json"}},
		{name: "inc-value", args: []string{"inc", hits, "--by", "5", "-o", "value"}},
		{name: "dec-text", args: []string{"dec", hits, "--by", "6"}},
		{name: "dec-json", args: []string{"dec", hits, "--format", "json"}},
		{name: "dec-value", args: []string{"dec", hits, "--by", "2", "--request-id", "dec-1", "-o", "value"}},
		{name: "dec-replayed", args: []string{"dec", hits, "--by", "2", "--request-id", "dec-1", "-o", "value"}},
		{name: "err-inc-not-found", args: []string{"inc", scope + "nohits"}, code: exitFailed},
		{name: "err-inc-conflict", args: []string{"inc", hits, "--expected-version", "1"}, code: exitFailed},
		{name: "err-inc-wrong-type", args: []string{"inc", scope + "cursor"}, code: exitFailed},
		{name: "err-inc-out-of-range", args: []string{"inc", scope + "big"}, code: exitFailed},
		{name: "err-inc-bad-by", args: []string{"inc", hits, "--by", "0"}, code: exitUsage},
		// Bounds, decided by the server: one request, nothing changed on
		// exit 1; a write-only token learns the version, not the value.
		{name: "inc-max-text", args: []string{"inc", scope + "slots", "--create", "--max", "1"}},
		{name: "err-inc-max", args: []string{"inc", scope + "slots", "--max", "1"}, code: exitFailed},
		{name: "err-dec-min-create", args: []string{"dec", scope + "noslots", "--create", "--min", "0"}, code: exitFailed},
		{name: "err-dec-min-write-only", args: []string{"dec", scope + "slots", "--by", "2", "--min", "0", "--token", stack.WriterToken}, code: exitServer}, // a bound tests the value: forbidden without read
		{name: "err-dec-max-below-min", args: []string{"dec", scope + "slots", "--min", "1", "--max", "0"}, code: exitUsage},
		{name: "dec-min-json", args: []string{"dec", scope + "slots", "--min", "0", "--max", "1", "--format", "json"}},

		{name: "field-set-text", args: []string{"field", "set", task, "state=pending", "attempts=0", "note=hello world", "--create"}},
		{name: "field-set-json", args: []string{"field", "set", task, `result={"rows": 1}`, "label=\"007\"", "--format", "json"}},
		{name: "field-set-value", args: []string{"field", "set", task, "attempts=1", "--unset", "result", "-o", "value"}},
		{name: "field-get-text", args: []string{"field", "get", task, "state"}},
		{name: "field-get-json", args: []string{"field", "get", task, "note", "--format", "json"}},
		{name: "field-get-value", args: []string{"field", "get", task, "attempts", "-o", "value"}},
		{name: "field-cas-text", args: []string{"field", "cas", task, "state", "pending", "claimed", "owner=w1"}},
		{name: "field-cas-json", args: []string{"field", "cas", task, "owner", "w1", "null", "--format", "json"}},
		{name: "field-cas-value", args: []string{"field", "cas", task, "state", "claimed", "done", "-o", "value"}},
		{name: "err-field-cas-mismatch", args: []string{"field", "cas", task, "state", "pending", "claimed"}, code: exitFailed},
		{name: "err-field-cas-missing", args: []string{"field", "cas", task, "lease", `{"n": 1}`, "2"}, code: exitFailed},
		{name: "err-field-get-no-field", args: []string{"field", "get", task, "nope"}, code: exitFailed},
		{name: "err-field-get-no-key", args: []string{"field", "get", scope + "tasks/none", "state"}, code: exitFailed},
		{name: "err-field-set-no-key", args: []string{"field", "set", scope + "tasks/none", "state=new"}, code: exitFailed},
		{name: "err-field-set-wrong-type", args: []string{"field", "set", hits, "a=1"}, code: exitFailed},
		{name: "err-field-set-bad-arg", args: []string{"field", "set", task, "state"}, code: exitUsage},
		{name: "err-field-cas-args", args: []string{"field", "cas", task, "state", "done"}, code: exitUsage},

		{name: "lock-acquire-text", args: []string{"lock", "acquire", lk, "--holder", "alice", "--ttl", "1h"}},
		{name: "lock-acquire-reentered-json", args: []string{"lock", "acquire", lk, "--holder", "alice", "--ttl", "1h", "--format", "json"}},
		{name: "lock-check-text", args: []string{"lock", "check", lk}},
		{name: "lock-check-json", args: []string{"lock", "check", lk, "--format", "json"}},
		{name: "lock-check-value", args: []string{"lock", "check", lk, "-o", "value"}},
		{name: "lock-extend-value", args: []string{"lock", "extend", lk, "--holder", "alice", "--ttl", "2h", "-o", "value"}},
		{name: "err-lock-held", args: []string{"lock", "acquire", lk, "--holder", "bob"}, code: exitUnavailable},
		{name: "err-lock-held-wait", args: []string{"lock", "acquire", lk, "--holder", "bob", "--wait", "1s"}, code: exitUnavailable},
		{name: "err-lock-run-held", args: []string{"lock", "run", lk, "--holder", "bob", "--", "true"}, code: exitUnavailable},
		{name: "err-lock-release-not-holder", args: []string{"lock", "release", lk, "--holder", "bob"}, code: exitUnavailable},
		{name: "err-lock-extend-not-holder", env: map[string]string{"KVCTL_HOLDER": "bob"}, args: []string{"lock", "extend", lk}, code: exitUnavailable},
		{name: "err-lock-plain-write", args: []string{"set", lk, "1"}, code: exitUnavailable},
		{name: "lock-release-text", args: []string{"lock", "release", lk, "--holder", "alice"}},
		{name: "err-lock-check-free", args: []string{"lock", "check", lk}, code: exitFailed},
		{name: "err-lock-release-free", args: []string{"lock", "release", lk, "--holder", "alice"}, code: exitUnavailable},
		{name: "lock-acquire-value", env: map[string]string{"KVCTL_HOLDER": "carol"}, args: []string{"lock", "acquire", lk, "-o", "value"}},
		{name: "lock-acquire-json", env: map[string]string{"KVCTL_HOLDER": "dave"}, args: []string{"lock", "acquire", scope + "locks/other", "--ttl", "90", "--format", "json"}},
		{name: "lock-release-json", env: map[string]string{"KVCTL_HOLDER": "carol"}, args: []string{"lock", "release", lk, "--format", "json"}},
		{name: "lock-release-value", env: map[string]string{"KVCTL_HOLDER": "dave"}, args: []string{"lock", "release", scope + "locks/other", "-o", "value"}},
		{name: "err-lock-wrong-type", args: []string{"lock", "acquire", hits, "--holder", "alice"}, code: exitFailed},
		{name: "err-lock-bad-ttl", args: []string{"lock", "acquire", lk, "--ttl", "0"}, code: exitUsage},
		{name: "err-lock-run-no-dash", args: []string{"lock", "run", lk, "true"}, code: exitUsage},
		{name: "err-lock-run-not-found", args: []string{"lock", "run", lk, "--holder", "erin", "--", "./no-such-command"}, code: 127},
		{name: "err-lock-unknown", args: []string{"lock", "nope"}, code: exitUsage},

		{name: "leader-elect-text", args: []string{"leader", "elect", leader, "--id", "s1", "--ttl", "1h"}},
		{name: "leader-elect-json", args: []string{"leader", "elect", leader, "--holder", "s1", "--ttl", "1h", "--format", "json"}},
		{name: "leader-heartbeat-value", args: []string{"leader", "heartbeat", leader, "--id", "s1", "-o", "value"}},
		{name: "leader-check-text", args: []string{"leader", "check", leader}},
		{name: "leader-check-json", args: []string{"leader", "check", leader, "--format", "json"}},
		{name: "err-leader-elect-other", args: []string{"leader", "elect", leader, "--id", "s2"}, code: exitUnavailable},
		{name: "err-leader-heartbeat-not-leader", args: []string{"leader", "heartbeat", leader, "--id", "s2"}, code: exitUnavailable},
		{name: "err-leader-resign-not-leader", args: []string{"leader", "resign", leader, "--id", "s2"}, code: exitUnavailable},
		{name: "leader-resign-text", args: []string{"leader", "resign", leader, "--id", "s1"}},
		{name: "err-leader-check-none", args: []string{"leader", "check", leader}, code: exitFailed},
		{name: "err-leader-heartbeat-none", args: []string{"leader", "heartbeat", leader, "--id", "s1"}, code: exitUnavailable},
		{name: "leader-elect-value", args: []string{"leader", "elect", leader, "--id", "s2", "-o", "value"}},
		{name: "leader-check-value", args: []string{"leader", "check", leader, "-o", "value"}},
		{name: "leader-resign-json", args: []string{"leader", "resign", leader, "--id", "s2", "--format", "json"}},
		{name: "leader-elect-again-text", args: []string{"leader", "elect", leader, "--id", "s3"}},
		{name: "leader-resign-value", args: []string{"leader", "resign", leader, "--id", "s3", "-o", "value"}},
	})

	// Transactions: the seed's file format from stdin, keys in
	// KVCTL_PROJECT (TestTransaction covers the rest).
	demo := map[string]string{"KVCTL_PROJECT": strings.TrimSuffix(scope, "/")}
	seedTxn := `[{"op":"set","key":"txn/a","value":1,"condition":"attribute_not_exists(PK)"},{"op":"inc","key":"txn/n","by":2}]`
	runCases(t, []tc{
		{name: "txn-text", stdin: seedTxn, env: demo, args: []string{"transaction", "--file", "-"}},
		{name: "txn-json", stdin: `[{"op":"set","key":"txn/a","value":2,"expectedVersion":1},{"op":"dec","key":"txn/n"},{"op":"check","key":"txn/none","condition":{"exists":false}}]`,
			env: demo, args: []string{"transaction", "--file", "-", "--format", "json"}},
		{name: "txn-value", stdin: `[{"op":"delete","key":"txn/a","condition":{"version":2}},{"op":"patch","key":"txn/o","set":{"s":"new"},"create":true}]`,
			env: demo, args: []string{"txn", "-f", "-", "-o", "value"}},
		{name: "err-txn-condition", stdin: `[{"op":"inc","key":"txn/n"},{"op":"patch","key":"txn/o","set":{"s":"done"},"condition":{"field":"s","equals":"old"}}]`,
			env: demo, args: []string{"transaction", "--file", "-"}, code: exitFailed},
		{name: "err-txn-min", stdin: `[{"op":"set","key":"txn/b","value":1},{"op":"dec","key":"txn/n","by":5,"min":0}]`,
			env: demo, args: []string{"transaction", "--file", "-"}, code: exitFailed},
		{name: "err-txn-malformed", stdin: `[{"op":"set","key":"txn/a"`, env: demo, args: []string{"transaction", "--file", "-"}, code: exitUsage},
		{name: "err-txn-cross-project", stdin: `[{"op":"set","key":"txn/a","value":1},{"op":"set","key":"tenant/acme/project/other/a","value":1}]`,
			env: demo, args: []string{"transaction", "--file", "-"}, code: exitUsage},
	})

	t.Run("Seed", func(t *testing.T) {
		testSeedCommands(t, k, c, runCases)
	})

	t.Run("Locks", func(t *testing.T) {
		testLocks(t, k, c)
	})

	t.Run("Update", func(t *testing.T) {
		testUpdate(t, k, c)
	})

	t.Run("SetFromFile", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "v.json")
		if err := os.WriteFile(path, []byte(`{"from":"file"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := k.run(t, "", nil, "set", scope+"file", "--file", path, "-o", "value"); r.code != 0 || r.stdout != "{\"from\":\"file\"}\n" {
			t.Fatalf("set --file: %+v", r)
		}
		if r := k.run(t, "", nil, "set", scope+"file", "1", "--file", path); r.code != exitUsage {
			t.Fatalf("set with VALUE and --file: want exit 2, got %+v", r)
		}
	})

	t.Run("DevTokenFile", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, ".eskv"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".eskv", "dev-token"), []byte(stack.DevToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		local := *k
		local.dir = dir
		if r := local.run(t, "", map[string]string{"KVCTL_TOKEN": ""}, "exists", key); r.code != 0 {
			t.Fatalf("with ./.eskv/dev-token: %+v", r)
		}
		if r := local.run(t, "", map[string]string{"KVCTL_TOKEN": "", "ESKV_DEV_TOKEN": "wrong-token-000000000"}, "exists", key); r.code != exitServer || !strings.Contains(r.stderr, "ESKV_DEV_TOKEN") {
			t.Fatalf("ESKV_DEV_TOKEN comes before the file: %+v", r)
		}
	})

	t.Run("Completion", func(t *testing.T) {
		for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
			if r := k.run(t, "", nil, "completion", shell); r.code != 0 || !strings.Contains(r.stdout, "kvctl") {
				t.Fatalf("completion %s: exit %d, %s", shell, r.code, r.stderr)
			}
		}
		r := k.run(t, "", nil, "__complete", "get", scope+"jobs/")
		if r.code != 0 || !strings.Contains(r.stdout, scope+"jobs/03\n") || strings.Contains(r.stdout, scope+"jobs/00\n") {
			t.Fatalf("key completion: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// Before a scope, the projects of GET /v1/projects: the key's
		// project and "/", no space after it (directive 6: NoSpace|NoFileComp).
		if r := k.run(t, "", nil, "__complete", "get", "tenant/ac"); !strings.Contains(r.stdout, scope+"\n") || !strings.Contains(r.stdout, "\n:6\n") {
			t.Fatalf("project completion of a key: %s%s", r.stdout, r.stderr)
		}
		if r := k.run(t, "", nil, "__complete", "get", "--table", "tenant/acme/"); !strings.Contains(r.stdout, strings.TrimSuffix(scope, "/")+"\n") || !strings.Contains(r.stdout, "\n:4\n") {
			t.Fatalf("--table completion: %s%s", r.stdout, r.stderr)
		}
		if r := k.run(t, "", nil, "__complete", "get", "config/"); strings.Contains(r.stdout, "tenant/") {
			t.Fatalf("a relative key completed with projects: %s", r.stdout)
		}
		if r := k.run(t, "", nil, "__complete", "set", key, "1", "--purpose", ""); !strings.Contains(r.stdout, "feature_flag\n") {
			t.Fatalf("--purpose completion: %s", r.stdout)
		}
	})

	t.Run("InProcess", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		getenv := func(name string) string { return k.env[name] }
		code := run(ctx, []string{"set", scope + "inproc", "-", "-o", "value"}, getenv, stdio{strings.NewReader("[1, 2]"), &stdout, &stderr})
		if code != 0 || stdout.String() != "[1,2]\n" || stderr.Len() != 0 {
			t.Fatalf("run: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
		}
	})

	t.Run("ReadmeSection", func(t *testing.T) {
		testReadmeSection(t, k.env)
	})
}

// TestHelpHasExamples checks every command's help, found by walking the
// command tree (completion's per-shell commands are cobra's own).
func TestHelpHasExamples(t *testing.T) {
	t.Parallel()
	var cmds [][]string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		cmds = append(cmds, strings.Fields(c.CommandPath())[1:])
		if c.Name() == "completion" {
			return
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk((&app{getenv: func(string) string { return "" }}).rootCommand())
	if len(cmds) < 20 {
		t.Fatalf("found only %d commands: %v", len(cmds), cmds)
	}
	for _, cmd := range cmds {
		t.Run(strings.Join(append([]string{"kvctl"}, cmd...), " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append(slices.Clone(cmd), "--help"), func(string) string { return "" }, stdio{strings.NewReader(""), &stdout, &stderr})
			if code != 0 || !strings.Contains(stdout.String(), "Examples:\n  kvctl ") {
				t.Fatalf("exit %d, help without examples:\n%s%s", code, stdout.String(), stderr.String())
			}
		})
	}
}

func TestParseTTL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30s", 30 * time.Second, true},
		{"1h30m", 90 * time.Minute, true},
		{"3600", time.Hour, true},
		{"1", time.Second, true},
		{"0", 0, false},
		{"-5s", 0, false},
		{"1.5s", 0, false},
		{"500ms", 0, false},
		{"soon", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseTTL(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("parseTTL(%q) = %v, %v", tc.in, got, err)
			}
		})
	}
}

func TestGetCounter(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.DevToken)
	counter, text := scope+"counters/visits", scope+"counters/text"
	if _, err := c.Increment(t.Context(), client.IncrementRequest{Key: counter, By: 42, Create: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(t.Context(), client.PutRequest{Key: text, Value: json.RawMessage(`"seven"`)}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken}
	for _, tc := range []struct {
		name         string
		args         []string
		code         int
		stdout, errs string
	}{
		{"OKText", []string{counter, "--format", "text"}, exitOK, "42\n", ""},
		{"OKJSONWhenPiped", []string{counter}, exitOK, `{"key":"` + counter + `","value":42,"type":"counter","version":1}` + "\n", ""},
		{"OKValue", []string{counter, "--format", "value"}, exitOK, "42\n", ""},
		{"OKJSON", []string{counter, "-o", "json"}, exitOK, `{"key":"` + counter + `","value":42,"type":"counter","version":1}` + "\n", ""},
		{"ErrNotFound", []string{scope + "counters/missing"}, exitFailed, "", "[not_found]"},
		{"ErrWrongType", []string{text}, exitFailed, "", "[wrong_type]"},
		{"ErrBadKey", []string{scope + "Counter"}, exitUsage, "", "[invalid]"},
		{"ErrArgs", nil, exitUsage, "", "takes KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), append([]string{"get-counter"}, tc.args...), func(k string) string { return env[k] }, stdio{strings.NewReader(""), &stdout, &stderr})
			if code != tc.code || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.errs) {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d stdout %q stderr with %q",
					code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.errs)
			}
		})
	}
}
