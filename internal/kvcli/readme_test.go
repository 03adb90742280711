package kvcli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeSection returns the shell blocks of the "By example" section of
// docs/kvctl.md, the CLI's tour.
func readmeSection(tb testing.TB, doc string) string {
	tb.Helper()
	_, after, ok := strings.Cut(doc, "\n## By example\n")
	if !ok {
		tb.Fatal(`docs/kvctl.md has no "## By example"`)
	}
	if i := strings.Index(after, "\n## "); i >= 0 {
		after = after[:i]
	}
	var script []string
	for {
		_, rest, ok := strings.Cut(after, "\n```sh\n")
		if !ok {
			break
		}
		block, rest, _ := strings.Cut(rest, "\n```\n")
		script = append(script, block)
		after = rest
	}
	if len(script) == 0 {
		tb.Fatal("the By example section has no ```sh block")
	}
	return strings.Join(script, "\n") + "\n"
}

// testReadmeSection runs the By example section as written, from the
// repository root, against the stack in env (KVCTL_URL, KVCTL_TOKEN):
// its first line builds kvctl into the repository's bin/ (git-ignored).
func testReadmeSection(t *testing.T, env map[string]string) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kvctl.md"))
	if err != nil {
		t.Fatal(err)
	}
	script := readmeSection(t, string(doc))
	gobin := t.TempDir()
	cmd := exec.Command("bash", "-eo", "pipefail", "-c", script)
	cmd.Dir = filepath.Join("..", "..")
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "KVCTL_") && name != "ESKV_DEV_TOKEN" && name != "GOBIN" && name != "PATH" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GOBIN="+gobin, "PATH="+gobin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for name, v := range env {
		cmd.Env = append(cmd.Env, name+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the By example section failed: %v\n--- script ---\n%s--- output ---\n%s", err, script, out)
	}
	t.Logf("By example section output:\n%s", out)
	for _, want := range []string{"exit 1: ", " exists\n", " is gone\n", `{"hello":"world"}`, "\n\"claimed\"\n", "nightly job, token ", `"holder":"scheduler-1"`, "applied: 2 ops\n", "exit 1: op 0's condition failed",
		"Rate limit exceeded\n", "exit 1: agent/status already exists", "\n\"none\"\n", "rate-limit/api-key-123\n", "quiet: exit 0\n",
		"agent-123 is active\n", "\n2\n", "exit 1: agent-123 is gone",
		"\nUser logout at 09:30\n1\nUser login at 09:00\n", "exit 1: activity-log is empty",
		"{\"task\":\"urgent\"}\n{\"task\":\"resize\",\"id\":1}\n", "#1#", " (tenant/acme/project/demo/work-queue size 1)\n", "exit 4: work-queue is empty",
		"(deleted)", `"cursor":"3"`, "exit 1: never written"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the By example section's output lacks %q:\n%s", want, out)
		}
	}
}
