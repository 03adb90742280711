package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/testenv/stack"
)

// kvstore is the built binary with the environment of one stack.
type kvstore struct {
	bin string
	env []string
	dir string
}

// result is one run of kvstore.
type result struct {
	stdout, stderr string
	code           int
}

func start(t *testing.T) (*kvstore, string) {
	t.Helper()
	url := stack.MustStart(t)
	bin := filepath.Join(t.TempDir(), "kvstore")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	home := t.TempDir()
	env := []string{"PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "HOME=" + home,
		"KVCTL_URL=" + url, "KVCTL_TOKEN=" + stack.DevToken, "KVSTORE_TENANT=acme"}
	return &kvstore{bin: bin, env: env, dir: t.TempDir()}, url
}

func (k *kvstore) run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(k.bin, args...)
	cmd.Dir, cmd.Env = k.dir, append(append([]string{}, k.env...), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// must runs args and wants exit code want.
func (k *kvstore) must(t *testing.T, want int, args ...string) result {
	t.Helper()
	r := k.run(t, nil, args...)
	if r.code != want {
		t.Fatalf("kvstore %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
	}
	return r
}

// fields decodes a JSON object and checks it has exactly the fields
// named, in the types the specification shows (s string, n number, n?
// number or null, a any); "...": "extra" allows fields eskv adds.
func fields(t *testing.T, out string, want map[string]string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, out)
	}
	for name, kind := range want {
		v, ok := m[name]
		if name == "..." {
			continue
		}
		if !ok {
			t.Errorf("field %q missing in %s", name, out)
			continue
		}
		switch _, isNum := v.(float64); {
		case kind == "s" && !isString(v), kind == "n" && !isNum, kind == "n?" && !isNum && v != nil:
			t.Errorf("field %q is %v (%T), want kind %s", name, v, v, kind)
		}
	}
	for name := range m {
		if _, ok := want[name]; !ok && want["..."] == "" {
			t.Errorf("field %q is not in the specification's shape: %s", name, out)
		}
	}
	return m
}

func isString(v any) bool { _, ok := v.(string); return ok }

// TestSpecificationShapes runs the specification's commands and compares
// their JSON field by field with its examples.
func TestSpecificationShapes(t *testing.T) {
	t.Parallel()
	k, _ := start(t)
	k.must(t, 0, "set", "config/api-key", "sk-abc123", "--ttl", "3600")
	m := fields(t, k.must(t, 0, "get", "config/api-key").stdout,
		map[string]string{"key": "s", "value": "a", "type": "s", "ttl": "n?", "created_at": "n", "updated_at": "n"})
	if m["key"] != "config/api-key" || m["value"] != "sk-abc123" || m["type"] != "kv" || m["ttl"] == nil {
		t.Errorf("get: %v", m)
	}
	k.must(t, 0, "get", "config/missing", "--default", "none")
	k.must(t, 0, "delete", "config/api-key", "--if-value", "sk-abc123")
	k.must(t, 1, "exists", "config/api-key")

	k.must(t, 0, "lock", "acquire", "deploy-prod", "--ttl", "300", "--owner", "agent-123")
	m = fields(t, k.must(t, 0, "lock", "check", "deploy-prod").stdout, map[string]string{"lock": "s", "owner": "s", "ttl": "n?", "acquired_at": "n"})
	if m["lock"] != "deploy-prod" || m["owner"] != "agent-123" {
		t.Errorf("lock check: %v", m)
	}
	k.must(t, 4, "lock", "acquire", "deploy-prod", "--ttl", "300", "--owner", "agent-2")
	k.must(t, 0, "lock", "release", "deploy-prod", "--owner", "agent-123")
	k.must(t, 1, "lock", "check", "deploy-prod")

	k.must(t, 0, "leader", "elect", "build-manager", "--ttl", "30", "--id", "agent-123")
	m = fields(t, k.must(t, 0, "leader", "check", "build-manager").stdout, map[string]string{"pool": "s", "leader": "s", "ttl": "n?", "elected_at": "n"})
	if m["pool"] != "build-manager" || m["leader"] != "agent-123" {
		t.Errorf("leader check: %v", m)
	}
	k.must(t, 4, "leader", "elect", "build-manager", "--ttl", "30", "--id", "agent-456")

	k.must(t, 0, "queue", "push", "tasks", `{"task": "analyze-logs", "params": {...}}`)
	k.must(t, 0, "queue", "push", "tasks", `{"task": "urgent"}`, "--priority", "1")
	m = fields(t, k.must(t, 0, "queue", "size", "tasks").stdout, map[string]string{"queue": "s", "size": "n", "...": "extra"})
	if m["size"] != 2.0 {
		t.Errorf("queue size: %v", m)
	}
	k.must(t, 0, "sadd", "active-agents", "agent-123")
	k.must(t, 0, "sadd", "active-agents", "agent-456")
	k.must(t, 0, "sismember", "active-agents", "agent-123")
	k.must(t, 1, "sismember", "active-agents", "agent-789")
	k.must(t, 0, "lpush", "recent-logs", "Error at 12:34:56")
	m = fields(t, k.must(t, 0, "lpop", "recent-logs").stdout, map[string]string{"list": "s", "value": "a", "...": "extra"})
	if m["value"] != "Error at 12:34:56" {
		t.Errorf("lpop: %v", m)
	}
	// Keys may hold ':' in their path, but never end in a verb name.
	k.must(t, 0, "set", "user:alice", `{"name": "Alice"}`)
	k.must(t, 0, "set", "config:theme", "dark")
	if m := fields(t, k.must(t, 0, "get", "user:alice").stdout, map[string]string{"key": "s", "value": "a", "type": "s", "ttl": "n?", "created_at": "n", "updated_at": "n"}); m["key"] != "user:alice" {
		t.Errorf("get user:alice: %v", m)
	}
	k.must(t, 0, "inc", "gbe:state:tasks:count", "--create")
	if v := strings.TrimSpace(k.must(t, 0, "inc", "gbe:state:tasks:count", "--format", "value").stdout); v != "2" {
		t.Errorf("inc gbe:state:tasks:count twice: %s", v)
	}
	k.must(t, 2, "set", "counter:increment", "1")
	k.must(t, 2, "get", "tenant/ac:me/project/p/k")
	// --json requires JSON; --string forces a string.
	if r := k.must(t, 2, "set", "n", "hello", "--json"); !strings.Contains(r.stderr, "Solution:") {
		t.Errorf("set --json text: no Solution line\n%s", r.stderr)
	}
	k.must(t, 0, "set", "n", "42", "--string")
	if v := strings.TrimSpace(k.must(t, 0, "get", "n", "--format", "value").stdout); v != `"42"` {
		t.Errorf("set --string 42 stored %s", v)
	}
}

// TestSpecificationCLITests runs the specification's CLI tests verbatim:
// inc on test-kvstore, and inc of a missing counter exiting 1 with
// "does not exist" and a Solution line.
func TestSpecificationCLITests(t *testing.T) {
	t.Parallel()
	k, url := start(t)
	created := fields(t, k.must(t, 0, "create-table", "--table", "test-kvstore", "--billing", "on-demand").stdout,
		map[string]string{"table": "s", "namespace": "s", "billing": "s", "created": "a"})
	if created["namespace"] != "tenant/acme/project/test-kvstore" || created["created"] != true {
		t.Errorf("create-table: %v", created)
	}
	if again := k.must(t, 0, "create-table", "--table", "test-kvstore").stdout; !strings.Contains(again, `"created":false`) {
		t.Errorf("create-table again: %s", again)
	}
	k.must(t, 0, "set", "test-counter", "0", "--table", "test-kvstore")
	if r := k.must(t, 0, "inc", "test-counter", "--table", "test-kvstore"); !strings.Contains(r.stdout, "value") {
		t.Errorf("inc: %s", r.stdout)
	}
	r := k.must(t, 1, "inc", "missing-counter", "--table", "test-kvstore")
	if out := r.stdout + r.stderr; !strings.Contains(out, "does not exist") || !strings.Contains(out, "Solution") {
		t.Errorf("inc missing-counter:\n%s", out)
	}
	// The default table, and KVSTORE_TABLE.
	k.must(t, 0, "set", "counter", "0")
	c := client.New(url, stack.DevToken)
	if _, err := c.Get(t.Context(), "tenant/acme/project/aws-primitives-tool-kvstore/counter"); err != nil {
		t.Errorf("the default table: %v", err)
	}
	if r := k.run(t, []string{"KVSTORE_TABLE=my-custom-table"}, "set", "counter", "0"); r.code != 0 {
		t.Errorf("KVSTORE_TABLE=my-custom-table: exit %d\n%s", r.code, r.stderr)
	}
	// Without KVSTORE_TENANT, the tenant is the only one whose projects
	// the token lists (acme's token lists acme's once the projection
	// holds a key of it).
	acme := []string{"KVSTORE_TENANT=", "KVCTL_TOKEN=" + stack.AcmeToken}
	deadline := time.Now().Add(10 * time.Second)
	for r := k.run(t, acme, "get", "test-counter", "--table", "test-kvstore"); r.code != 0; r = k.run(t, acme, "get", "test-counter", "--table", "test-kvstore") {
		if time.Now().After(deadline) {
			t.Fatalf("the token's only tenant: exit %d\n%s", r.code, r.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := k.run(t, []string{"KVSTORE_TABLE=My Table"}, "set", "counter", "0"); r.code != 2 || !strings.Contains(r.stderr, "Solution:") {
		t.Errorf("KVSTORE_TABLE='My Table': exit %d\n%s", r.code, r.stderr)
	}
}

// TestProfiles: --profile picks URL, token, tenant and table from the
// profiles file; --region one of its URLs; unknown ones exit 2.
func TestProfiles(t *testing.T) {
	t.Parallel()
	k, url := start(t)
	// No tenant (no profile, no KVSTORE_TENANT, a token listing no
	// project yet): full keys work, short keys exit 2.
	none := []string{"KVSTORE_TENANT=", "KVSTORE_CONFIG=" + filepath.Join(t.TempDir(), "none.json")}
	if r := k.run(t, none, "get", "tenant/acme/project/p/absent"); r.code != 1 {
		t.Errorf("a full key without a tenant: exit %d, want 1 (absent)\n%s", r.code, r.stderr)
	}
	if r := k.run(t, none, "get", "absent"); r.code != 2 || !strings.Contains(r.stderr, "KVSTORE_TENANT") {
		t.Errorf("a short key without a tenant: exit %d, want 2\n%s", r.code, r.stderr)
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(stack.DevToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "kvstore.json")
	body := `{"profiles": {"dev": {"url": "http://127.0.0.1:1", "regions": {"eu-central-1": "` + url + `"}, "region": "eu-central-1",
		"token_file": "` + tokenFile + `", "tenant": "globex", "table": "prod-store"}}}`
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"KVSTORE_CONFIG=" + conf, "KVCTL_URL=http://127.0.0.1:1", "KVCTL_TOKEN=nope", "KVSTORE_TENANT="}
	if r := k.run(t, env, "--profile", "dev", "set", "user:alice", `{"name": "Alice"}`); r.code != 0 {
		t.Fatalf("--profile dev: exit %d\n%s", r.code, r.stderr)
	}
	c := client.New(url, stack.DevToken)
	if _, err := c.Get(t.Context(), "tenant/globex/project/prod-store/user:alice"); err != nil {
		t.Errorf("the profile's tenant and table: %v", err)
	}
	for _, args := range [][]string{{"--profile", "nope", "get", "x"}, {"--profile", "dev", "--region", "mars-1", "get", "x"}} {
		if r := k.run(t, env, args...); r.code != 2 || !strings.Contains(r.stderr, "Solution:") {
			t.Errorf("%v: exit %d, want 2 with a Solution line\n%s", args, r.code, r.stderr)
		}
	}
}

// TestUseCases runs the specification's use cases 1-8 as it writes them
// (testdata/use-cases.sh: bounded loops and stand-in scripts, marked
// there) with kvstore on PATH in its default table.
func TestUseCases(t *testing.T) {
	t.Parallel()
	k, _ := start(t)
	cmd := exec.Command("bash", "-u", filepath.Join("testdata", "use-cases.sh"))
	cmd.Env = k.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("use cases: %v\n%s", err, out)
	}
	for _, want := range []string{"## done", "Lock acquired, deploying...", "I am the leader!", "Another agent is leader, standing by...",
		"Processing request ID: 2", "Message already processed, skipping", "Queue empty, waiting...", `processing "{\"task\": \"task3\", \"params\": {...}}"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("use cases: no %q in\n%s", want, out)
		}
	}
}

// TestE2ELockWorkflow runs the specification's end-to-end test: agent 2
// waits (--wait 10) for the lock agent 1 holds for 2 seconds.
func TestE2ELockWorkflow(t *testing.T) {
	t.Parallel()
	k, _ := start(t)
	cmd := exec.Command("bash", filepath.Join("testdata", "e2e-lock-workflow.sh"))
	cmd.Env = k.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("e2e lock workflow: %v\n%s", err, out)
	}
	// The two agents print concurrently, so their lines may interleave in
	// any order: the versions say what the server did in which order.
	// Agent 1's release is the first release (agent 2 releases after its
	// acquire), and agent 2's acquire must come after it.
	s := string(out)
	firstRelease, agent2 := int64(0), int64(0)
	for line := range strings.Lines(s) {
		var a struct {
			Holder   string `json:"holder"`
			Version  int64  `json:"version"`
			Released bool   `json:"released"`
		}
		if json.Unmarshal([]byte(line), &a) != nil {
			continue
		}
		switch {
		case a.Released && (firstRelease == 0 || a.Version < firstRelease):
			firstRelease = a.Version
		case a.Holder == "agent-2":
			agent2 = a.Version
		}
	}
	if !strings.Contains(s, "Agent 1 released lock") || !strings.Contains(s, "Agent 2 acquired lock after waiting") ||
		firstRelease == 0 || agent2 <= firstRelease {
		t.Errorf("agent 2 did not acquire after agent 1 released (release at version %d, agent 2's acquire at %d):\n%s", firstRelease, agent2, s)
	}
}
