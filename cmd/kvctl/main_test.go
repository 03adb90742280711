package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestKvctlBinary builds kvctl, stamped as make build stamps it, and
// runs it against a stack: the thin main runs internal/kvcli with kvctl's
// conventions (its command tests are there), a text VALUE is stored as a
// JSON string, and kvctl version prints the client's stamped build and
// the server's from GET /version.
func TestKvctlBinary(t *testing.T) {
	t.Parallel()
	server := contract.BuildInfo{Version: "v0.9.0", Revision: "feedbeef", GoVersion: "go1.0"}
	url := stack.MustRun(t, stack.API(api.Config{Build: server})).URL
	bin := filepath.Join(t.TempDir(), "kvctl")
	const stamp = "-X github.com/eskv/eskv/internal/buildinfo.version=v1.2.3 -X github.com/eskv/eskv/internal/buildinfo.revision=0123abc"
	if out, err := exec.Command("go", "build", "-ldflags", stamp, "-o", bin, ".").CombinedOutput(); err != nil {
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
	out, code := run("version", "--format", "text")
	if want := "client: kvctl v1.2.3 (revision 0123abc, " + runtime.Version() + ")\nserver: writer v0.9.0 (revision feedbeef, go1.0)\n"; code != 0 || out != want {
		t.Errorf("version: exit %d\n%s\nwant\n%s", code, out, want)
	}
	if out, code := run("version", "--token", "not-a-token-0123456789abcdef"); code == 0 || !strings.Contains(out, `"client":{"version":"v1.2.3"`) {
		t.Errorf("version with a wrong token: exit %d, %s; want the client's build and a failure", code, out)
	}
	// kvctl keeps its conventions: a table must be tenant/<t>/project/<p>.
	if _, code := run("get", "k", "--table", "my-custom-table"); code != 2 {
		t.Errorf("--table my-custom-table: exit %d, want 2", code)
	}
}
