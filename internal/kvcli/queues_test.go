package kvcli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/eskv/eskv/testenv/stack"
)

// TestQueuesCLI pins queue push, pop, peek, size and ack: their text,
// json and value output and exit codes 0, 1, 2, 3 and 4, with full keys
// and short keys in the namespace, --visibility-timeout and its default
// KVSTORE_QUEUE_VISIBILITY. The cases run in order; an argument
// "<RECEIPT>" is the receipt of the last pop printed as json.
func TestQueuesCLI(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	k := &kvctlBin{path: mustBuild(t), env: map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_FORMAT": formatText}, dir: t.TempDir()}
	q, fresh := scope+"tasks", scope+"fresh"
	pipe := map[string]string{"KVCTL_FORMAT": ""}
	ns := strings.TrimSuffix(scope, "/")
	project := map[string]string{"KVSTORE_TABLE": ns}
	visible := map[string]string{"KVSTORE_QUEUE_VISIBILITY": "60", "KVCTL_FORMAT": formatJSON}
	receipt := ""
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
	}{
		{name: "err-pop-empty", env: project, args: []string{"queue", "pop", "tasks"}, code: exitUnavailable},
		{name: "size-missing-json", args: []string{"queue", "size", q, "--format", "json"}},
		{name: "push-text", args: []string{"queue", "push", q, `{"task": "analyze-logs", "params": {"day": 1}}`}},
		{name: "push-priority-json", args: []string{"queue", "push", q, `{"task": "urgent"}`, "--priority", "-1", "--format", "json"}},
		{name: "push-dedup-value", args: []string{"queue", "push", q, `{"task": "idempotent"}`, "--dedup-id", "task-123", "--format", "value"}},
		{name: "push-dedup-again-text", args: []string{"queue", "push", q, `{"task": "idempotent"}`, "--dedup-id", "task-123"}},
		{name: "push-not-json-project", env: project, args: []string{"queue", "push", "tasks", `{"task": "t4", "params": {...}}`}},
		{name: "size-text", args: []string{"queue", "size", q}},
		{name: "peek-text", args: []string{"queue", "peek", q, "--count", "10"}},
		{name: "peek-json", args: []string{"queue", "peek", q, "--count", "2", "--format", "json"}},
		{name: "peek-value", env: project, args: []string{"queue", "peek", "tasks", "--count", "3", "-o", "value"}},
		{name: "pop-visibility-json", args: []string{"queue", "pop", q, "--visibility-timeout", "300", "--format", "json"}},
		{name: "size-in-flight-json", args: []string{"queue", "size", q, "--format", "json"}},
		{name: "ack-text", args: []string{"queue", "ack", q, "<RECEIPT>"}},
		{name: "err-ack-stale", args: []string{"queue", "ack", q, "<RECEIPT>"}, code: exitFailed},
		{name: "pop-text", args: []string{"queue", "pop", q}},
		{name: "pop-env-visibility-json", env: visible, args: []string{"queue", "pop", "tasks", "--table", ns}},
		{name: "ack-json", args: []string{"queue", "ack", q, "<RECEIPT>", "--format", "json"}},
		{name: "push-last-value", args: []string{"queue", "push", q, "last", "-o", "value"}},
		{name: "pop-env-text", env: map[string]string{"KVSTORE_QUEUE_VISIBILITY": "1m"}, args: []string{"queue", "pop", q}},
		{name: "pop-zero-overrides-env-value", env: map[string]string{"KVSTORE_QUEUE_VISIBILITY": "60"}, args: []string{"queue", "pop", q, "--visibility-timeout", "0", "-o", "value"}},
		{name: "size-value", args: []string{"queue", "size", q, "-o", "value"}},
		{name: "peek-empty-json", args: []string{"queue", "peek", q, "--format", "json"}},
		{name: "err-pop-all-in-flight-default-json", env: pipe, args: []string{"queue", "pop", q}, code: exitUnavailable},
		{name: "err-pop-bad-visibility", args: []string{"queue", "pop", q, "--visibility-timeout", "1.5s"}, code: exitUsage},
		{name: "err-pop-bad-env", env: map[string]string{"KVSTORE_QUEUE_VISIBILITY": "soon"}, args: []string{"queue", "pop", q}, code: exitUsage},
		{name: "err-peek-count", args: []string{"queue", "peek", q, "--count", "0"}, code: exitUsage},
		{name: "err-push-priority", args: []string{"queue", "push", q, "1", "--priority", "2000000000"}, code: exitUsage},
		{name: "err-push-args", args: []string{"queue", "push", q}, code: exitUsage},
		{name: "err-push-not-a-queue", args: []string{"queue", "push", key, "1"}, code: exitFailed},
		{name: "err-pop-forbidden", args: []string{"queue", "pop", q, "--token", stack.ReaderToken}, code: exitServer},
		{name: "err-set-over-queue", args: []string{"set", q, "1"}, code: exitFailed},
		// Item TTL, on a queue of its own: --item-ttl expires the item, --ttl the queue.
		{name: "push-item-ttl-json", args: []string{"queue", "push", fresh, `{"task": "fresh-only"}`, "--item-ttl", "10m", "--format", "json"}},
		{name: "push-item-ttl-seconds-text", args: []string{"queue", "push", fresh, `"b"`, "--item-ttl", "3600", "--ttl", "24h"}},
		{name: "peek-item-ttl-text", args: []string{"queue", "peek", fresh, "--count", "2"}},
		{name: "peek-item-ttl-json", args: []string{"queue", "peek", fresh, "--count", "2", "--format", "json"}},
		{name: "pop-item-ttl-json", args: []string{"queue", "pop", fresh, "--visibility-timeout", "60", "--format", "json"}},
		{name: "err-push-item-ttl-fraction", args: []string{"queue", "push", fresh, "1", "--item-ttl", "1.5s"}, code: exitUsage},
		{name: "err-push-item-ttl-zero", args: []string{"queue", "push", fresh, "1", "--item-ttl", "0"}, code: exitUsage},
		{name: "err-push-item-ttl-too-long", args: []string{"queue", "push", fresh, "1", "--item-ttl", "400000000"}, code: exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "err-push-not-a-queue" {
				if r := k.run(t, "", nil, "set", key, `"plain"`); r.code != 0 {
					t.Fatalf("set %s: %s", key, r.stderr)
				}
			}
			args := slices.Clone(tc.args)
			if i := slices.Index(args, "<RECEIPT>"); i >= 0 {
				args[i] = receipt
			}
			r := k.run(t, "", tc.env, args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
			var pop struct{ Receipt string }
			if strings.HasPrefix(tc.name, "pop-") && json.Unmarshal([]byte(r.stdout), &pop) == nil && pop.Receipt != "" {
				receipt = pop.Receipt
			}
			golden(t, "queues-"+tc.name, args, r)
		})
	}
	t.Run("Completion", func(t *testing.T) {
		r := k.run(t, "", nil, "__complete", "queue", "")
		for _, sub := range []string{"push", "pop", "peek", "size", "ack"} {
			if !strings.Contains("\n"+r.stdout, "\n"+sub+"\t") {
				t.Errorf("queue completion lacks %s:\n%s", sub, r.stdout)
			}
		}
		if r := k.run(t, "", nil, "__complete", "queue", "pop", scope); !strings.Contains(r.stdout, q+"\n") {
			t.Errorf("QUEUE completion: %s%s", r.stdout, r.stderr)
		}
		if r := k.run(t, "", nil, "__complete", "set", key, "1", "--purpose", ""); !strings.Contains(r.stdout, "\nqueue\n") || !strings.Contains(r.stdout, "\nlist\n") {
			t.Errorf("--purpose completion: %s", r.stdout)
		}
	})
}
