package kvcli

import (
	"strings"
	"testing"

	"github.com/eskv/eskv/testenv/stack"
)

// TestHistoryCLI pins kvctl history: text, json and value output of five
// versions written by two principals with a delete and a re-create
// among them, pages (--from-version, --limit, --cursor, --all), a short
// key in the namespace, a set's element events, and the exits of a key
// never written (1), a token without read and bad flags. The cases run
// in order.
func TestHistoryCLI(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	k := &kvctlBin{path: mustBuild(t), env: map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_FORMAT": formatText}, dir: t.TempDir()}
	doc, set := scope+"history/doc", scope+"history/agents"
	for _, w := range [][]string{
		{"set", doc, `{"n":1}`},
		{"set", doc, `{"n":2}`, "--token", stack.AcmeToken},
		{"delete", doc},
		{"set", doc, `"again"`, "--token", stack.AcmeToken},
		{"set", doc, `[1,2,3]`},
		{"sadd", set, "agent-1"}, {"sadd", set, "agent-2"}, {"srem", set, "agent-1"},
	} {
		if r := k.run(t, "", nil, w...); r.code != 0 {
			t.Fatalf("kvctl %v: exit %d %s", w, r.code, r.stderr)
		}
	}
	pipe := map[string]string{"KVCTL_FORMAT": ""}
	project := map[string]string{"KVSTORE_TABLE": strings.TrimSuffix(scope, "/")}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
	}{
		{name: "text", args: []string{"history", doc}},
		{name: "json", args: []string{"history", doc, "--format", "json"}},
		{name: "value", args: []string{"history", doc, "--format", "value"}},
		{name: "default-json", env: pipe, args: []string{"history", doc}},
		{name: "page", args: []string{"history", doc, "--from-version", "2", "--limit", "2", "--format", "json"}},
		{name: "next-page", args: []string{"history", doc, "--cursor", "4", "--limit", "2"}},
		{name: "all", args: []string{"history", doc, "--limit", "2", "--all"}},
		{name: "project", env: project, args: []string{"history", "history/doc", "--from-version", "4"}},
		{name: "set", args: []string{"history", set}},
		{name: "err-never-written", args: []string{"history", scope + "history/never"}, code: exitFailed},
		{name: "err-never-written-json", args: []string{"history", scope + "history/never", "--format", "json"}, code: exitFailed},
		{name: "err-forbidden", args: []string{"history", doc, "--token", stack.WriterToken}, code: exitServer},
		{name: "err-limit", args: []string{"history", doc, "--limit", "1001"}, code: exitUsage},
		{name: "err-args", args: []string{"history"}, code: exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.run(t, "", tc.env, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
			golden(t, "history-"+tc.name, tc.args, r)
		})
	}
}
