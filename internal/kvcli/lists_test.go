package kvcli

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/testenv/stack"
)

// TestListsCLI pins lpush, rpush, lpop, rpop, lrange, ltrim and llen:
// their text, json and value output and exit codes, with full keys and
// short keys in the namespace. The cases run in order.
func TestListsCLI(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	k := &kvctlBin{path: mustBuild(t), env: map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_FORMAT": formatText}, dir: t.TempDir()}
	list := scope + "recent-logs"
	pipe := map[string]string{"KVCTL_FORMAT": ""}
	project := map[string]string{"KVSTORE_TABLE": strings.TrimSuffix(scope, "/")}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
	}{
		{name: "err-lpop-missing", args: []string{"lpop", list}, code: exitFailed},
		{name: "lpush-text", args: []string{"lpush", list, "Error at 12:34:56"}},
		{name: "rpush-json", args: []string{"rpush", list, "Task 123", "--format", "json"}},
		{name: "rpush-json-value", args: []string{"rpush", list, `{"task": 123}`, "--json", "--format", "value"}},
		{name: "lpush-project", env: project, args: []string{"lpush", "recent-logs", "first"}},
		{name: "llen-text", args: []string{"llen", list}},
		{name: "lrange-text", args: []string{"lrange", list, "0", "-1"}},
		{name: "lrange-json", args: []string{"lrange", list, "1", "2", "--format", "json"}},
		{name: "lrange-default-json", env: pipe, args: []string{"lrange", "recent-logs", "-2", "-1", "--table", strings.TrimSuffix(scope, "/")}},
		{name: "lpop-default-json", env: pipe, args: []string{"lpop", list}},
		{name: "rpop-text", args: []string{"rpop", list}},
		{name: "ltrim-text", args: []string{"ltrim", list, "0", "0"}},
		{name: "lrange-after-trim-value", args: []string{"lrange", list, "0", "99", "--format", "value"}},
		{name: "llen-json", args: []string{"llen", list, "--format", "json"}},
		{name: "lrange-missing-json", args: []string{"lrange", scope + "no-such-list", "0", "9", "--format", "json"}},
		{name: "err-lrange-index", args: []string{"lrange", list, "0", "x"}, code: exitUsage},
		{name: "err-rpush-bad-json", args: []string{"rpush", list, "{", "--json"}, code: exitUsage},
		{name: "err-lpush-not-a-list", args: []string{"lpush", key, "x"}, code: exitFailed},
		{name: "err-rpop-forbidden", args: []string{"rpop", list, "--token", stack.ReaderToken}, code: exitServer},
		{name: "err-set-over-list", args: []string{"set", list, "1"}, code: exitFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "err-lpush-not-a-list" {
				if r := k.run(t, "", nil, "set", key, `"plain"`); r.code != 0 {
					t.Fatalf("set %s: %s", key, r.stderr)
				}
			}
			r := k.run(t, "", tc.env, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
			golden(t, "lists-"+tc.name, tc.args, r)
		})
	}
}

// TestSeedUseCase7 runs the seed's "Use Case 7: Recent Activity Log
// (List)" as written, with kvctl installed as kvstore and the namespace
// in KVSTORE_TABLE, over a log of 1,005 events: lrange 0 99 prints the
// newest 100, newest first, and ltrim 0 999 keeps the newest 1,000.
func TestSeedUseCase7(t *testing.T) {
	t.Parallel()
	_, url, env := seedShell(t, "tenant/acme/project/activity")
	run := func(script string) string {
		cmd := exec.Command("bash", "-e", "-c", script)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("use case 7: %v\n%s", err, out)
		}
		return string(out)
	}
	// 1,004 older events, pushed through the Go client (the test's
	// setup: 1,004 runs of kvstore took two minutes of CI under the
	// race detector), then the seed's three lines as written.
	c := client.New(url, stack.DevToken)
	for i := 1; i <= 1004; i++ {
		v, _ := json.Marshal(fmt.Sprintf("event %d", i))
		if _, err := c.LPush(t.Context(), client.PushRequest{Key: "tenant/acme/project/activity/activity-log", Value: v}); err != nil {
			t.Fatalf("lpush event %d: %v", i, err)
		}
	}
	out := run(`
# Add event to front of log (newest first)
kvstore lpush activity-log "User login at $(date)"

# Retrieve last 100 events
kvstore lrange activity-log 0 99

# Trim old events (keep only last 1000)
kvstore ltrim activity-log 0 999
`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"length":1005`) || !strings.Contains(lines[2], `"length":1000`) {
		t.Fatalf("use case 7 printed %q", out)
	}
	if !strings.HasPrefix(lines[1], `{"list":"tenant/acme/project/activity/activity-log","values":["User login at `) ||
		!strings.Contains(lines[1], `,"event 1004","event 1003",`) || !strings.HasSuffix(lines[1], `"event 906"]}`) {
		t.Fatalf("lrange 0 99 printed %s", lines[1])
	}
	if got := run(`kvstore llen activity-log; kvstore lrange activity-log -1 -1`); got != "{\"list\":\"tenant/acme/project/activity/activity-log\",\"length\":1000}\n{\"list\":\"tenant/acme/project/activity/activity-log\",\"values\":[\"event 6\"]}\n" {
		t.Fatalf("after ltrim: %s", got)
	}
}
