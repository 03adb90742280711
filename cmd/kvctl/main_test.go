package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eskv/eskv/testenv/stack"
)

// TestKvctlBinary builds kvctl and runs it against a stack: the thin main runs
// internal/kvcli with kvctl's conventions (its command tests are there),
// and a text VALUE is stored as a JSON string.
func TestKvctlBinary(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	bin := filepath.Join(t.TempDir(), "kvctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := []string{"KVCTL_URL=" + url, "KVCTL_TOKEN=" + stack.DevToken, "HOME=" + t.TempDir()}
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env, cmd.Dir = env, t.TempDir()
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	const key = "tenant/acme/project/demo/config/api-key"
	if out, code := run("set", key, "sk-abc123"); code != 0 {
		t.Fatalf("set text: exit %d\n%s", code, out)
	}
	if out, code := run("get", key, "--format", "value"); code != 0 || strings.TrimSpace(out) != `"sk-abc123"` {
		t.Errorf("get: exit %d, %s", code, out)
	}
	if out, code := run("--help"); code != 0 || !strings.HasPrefix(out, "kvctl reads") {
		t.Errorf("--help: exit %d, %.80s", code, out)
	}
	// kvctl keeps its conventions: a table must be tenant/<t>/project/<p>.
	if _, code := run("get", "k", "--table", "my-custom-table"); code != 2 {
		t.Errorf("--table my-custom-table: exit %d, want 2", code)
	}
}
