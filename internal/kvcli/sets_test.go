package kvcli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eskv/eskv/testenv/stack"
)

// TestSetsCLI pins sadd, srem, sismember, smembers and scard: their
// text, json and value output and exit codes, with full keys and with
// short keys in the namespace (KVSTORE_TABLE, --table). The cases run in
// order.
func TestSetsCLI(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	// KVCTL_FORMAT=text as in TestCLI; the default-json cases unset it:
	// a pipe gets the seed's JSON.
	k := &kvctlBin{path: mustBuild(t), env: map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_FORMAT": formatText}, dir: t.TempDir()}
	set := scope + "active-agents"
	pipe := map[string]string{"KVCTL_FORMAT": ""}
	project := map[string]string{"KVSTORE_TABLE": strings.TrimSuffix(scope, "/")}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
	}{
		{name: "sadd-text", args: []string{"sadd", set, "agent-123"}},
		{name: "sadd-json", args: []string{"sadd", set, "agent-456", "--format", "json"}},
		{name: "sadd-again-value", args: []string{"sadd", set, "agent-456", "--format", "value"}},
		{name: "sadd-any-content", args: []string{"sadd", set, "név: \"x\"/y?z#1"}},
		{name: "sadd-project", env: project, args: []string{"sadd", "active-agents", "agent-789"}},
		{name: "sismember-yes", args: []string{"sismember", set, "agent-123"}},
		{name: "sismember-yes-json", args: []string{"sismember", "active-agents", "agent-123", "--table", strings.TrimSuffix(scope, "/"), "--format", "json"}},
		{name: "err-sismember-no", args: []string{"sismember", set, "agent-000"}, code: exitFailed},
		{name: "err-sismember-no-json", args: []string{"sismember", set, "agent-000", "--format", "json"}, code: exitFailed},
		{name: "scard-text", args: []string{"scard", set}},
		{name: "scard-json", env: project, args: []string{"scard", "active-agents", "--format", "json"}},
		{name: "smembers-json", args: []string{"smembers", set, "--format", "json"}},
		{name: "smembers-text", args: []string{"smembers", set}},
		{name: "smembers-default-json", env: pipe, args: []string{"smembers", set}},
		{name: "scard-default-json", env: pipe, args: []string{"scard", set}},
		{name: "sismember-quiet", args: []string{"sismember", set, "agent-456", "-q", "--format", "json"}},
		{name: "smembers-page", args: []string{"smembers", set, "--limit", "2", "--format", "json"}},
		{name: "smembers-all-value", args: []string{"smembers", set, "--limit", "2", "--all", "--format", "value"}},
		{name: "srem-text", args: []string{"srem", set, "agent-123"}},
		{name: "srem-again-json", args: []string{"srem", set, "agent-123", "--format", "json"}},
		{name: "scard-after-srem", args: []string{"scard", set, "--format", "value"}},
		{name: "smembers-missing-json", args: []string{"smembers", scope + "no-such-set", "--format", "json"}},
		{name: "scard-missing", args: []string{"scard", scope + "no-such-set"}},
		{name: "err-sadd-not-a-set", args: []string{"sadd", key, "x"}, code: exitFailed},
		{name: "err-sadd-no-project", args: []string{"sadd", "active-agents", "x"}, code: exitUsage},
		{name: "err-sadd-args", args: []string{"sadd", set}, code: exitUsage},
		{name: "err-sadd-empty-member", args: []string{"sadd", set, ""}, code: exitUsage},
		{name: "err-srem-forbidden", args: []string{"srem", set, "agent-456", "--token", stack.ReaderToken}, code: exitServer},
		{name: "err-set-over-set", args: []string{"set", set, "1"}, code: exitFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "err-sadd-not-a-set" {
				if r := k.run(t, "", nil, "set", key, `"plain"`); r.code != 0 {
					t.Fatalf("set %s: %s", key, r.stderr)
				}
			}
			r := k.run(t, "", tc.env, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
			golden(t, "sets-"+tc.name, tc.args, r)
		})
	}
}

// TestSeedUseCase6 runs the seed's "Use Case 6: Deduplication with Sets"
// as written, with kvctl installed as kvstore and the namespace in
// KVSTORE_TABLE: the first run processes the message, the second skips
// it.
func TestSeedUseCase6(t *testing.T) {
	t.Parallel()
	bin, _, env := seedShell(t, "tenant/acme/project/dedup")
	processed := filepath.Join(t.TempDir(), "processed")
	if err := os.WriteFile(filepath.Join(bin, "process-message.sh"), []byte("#!/bin/sh\necho \"$1\" >> "+processed+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const script = `
# Check if message already processed
message_id="msg-abc-123"

if kvstore sismember processed-messages "$message_id"; then
  echo "Message already processed, skipping"
  exit 0
fi

# Process message
process-message.sh "$message_id"

# Mark as processed
kvstore sadd processed-messages "$message_id"
`
	run := func() string {
		cmd := exec.Command("bash", "-e", "-c", script)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("use case 6: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := run(); strings.Contains(out, "already processed") {
		t.Fatalf("first run skipped: %s", out)
	}
	if out := run(); !strings.Contains(out, "Message already processed, skipping") {
		t.Fatalf("second run did not skip: %s", out)
	}
	b, err := os.ReadFile(processed)
	if err != nil || string(b) != "msg-abc-123\n" {
		t.Fatalf("processed %q (%v), want the message once", b, err)
	}
}
