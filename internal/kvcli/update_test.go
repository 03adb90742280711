package kvcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// testUpdate runs kvctl update against TestCLI's stack: golden answers,
// and a conflict the command itself causes (its first run writes the key
// through a second kvctl), which kvctl retries after the seed's first
// wait of 1 s.
func testUpdate(t *testing.T, k *kvctlBin, c *client.Client) {
	n := scope + "update/n"
	// add1 adds 1 to an integer; null (a missing key with --create) is 0.
	add1 := `read v; [ "$v" = null ] && v=0; echo $((v + 1))`
	// interfere writes 10 to the key on its first run only, between
	// kvctl's read and its write.
	interfere := `read v; if [ ! -e update-mark ]; then touch update-mark; "$KVCTL_BIN" set "$KVCTL_KEY" 10 >/dev/null || exit 9; fi; echo $((v + 1))`
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
	}{
		{name: "err-update-not-found", args: []string{"update", n, "--", "sh", "-c", add1}, code: exitFailed},
		{name: "update-create-text", args: []string{"update", n, "--create", "--", "sh", "-c", add1}},
		{name: "update-json", args: []string{"update", n, "--request-id", "u0", "--format", "json", "--", "sh", "-c", `echo "{\"n\":$(cat),\"v\":$KVCTL_VERSION}"`}},
		{name: "update-value", args: []string{"update", n, "--request-id", "u1", "-o", "value", "--", "sh", "-c", `read v; echo 2`}},
		{name: "update-replayed", args: []string{"update", n, "--request-id", "u1", "-o", "value", "--", "sh", "-c", `read v; echo 3`}},
		{name: "update-conflict-retried", env: map[string]string{"KVCTL_BIN": k.path}, args: []string{"update", n, "--", "sh", "-c", interfere}},
		{name: "err-update-cmd-fails", args: []string{"update", n, "--", "sh", "-c", "echo 'no such field' >&2; exit 5"}, code: 5},
		{name: "err-update-not-json", args: []string{"update", n, "--", "echo", "hello"}, code: exitUsage},
		{name: "err-update-no-output", args: []string{"update", n, "--", "true"}, code: exitUsage},
		{name: "err-update-cmd-not-found", args: []string{"update", n, "--", "./no-such-command"}, code: 127},
		{name: "err-update-no-dash", args: []string{"update", n, "sh"}, code: exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.run(t, "", tc.env, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
			golden(t, tc.name, tc.args, r)
		})
	}
	// After the conflict: the other writer's 10 plus one, and nothing
	// after it (the failed commands wrote nothing).
	e, err := c.Get(t.Context(), n)
	if err != nil || string(e.Value) != "11" || e.Version != 5 {
		t.Fatalf("after the updates: %s at version %d (%v), want 11 at version 5", e.Value, e.Version, err)
	}
}

// TestExplainEscalated: an escalation is explained as its last error,
// with the attempts; a conflict escalated by update says who to look for.
func TestExplainEscalated(t *testing.T) {
	t.Parallel()
	a := &app{stderr: io.Discard, url: defaultURL, cmdPath: "kvctl update", subject: key}
	conflict := &contract.Error{Code: contract.EConflict, Field: "expectedVersion", Message: "expected version 3, current version is 4",
		Current: &contract.Entry{Key: key, Version: 4, Value: json.RawMessage(`4`)}}
	for _, tc := range []struct {
		name          string
		err           error
		code          int
		msg, solution string
	}{
		{"Conflict", &client.EscalationError{Attempts: 7, Err: conflict}, exitFailed,
			"expected version 3, current version is 4 [version_conflict] (gave up after 7 attempts)", "other writers kept changing " + key},
		{"OutcomeUnknown", &client.EscalationError{Attempts: 2, Err: fmt.Errorf("%w: write u-2: %w", client.ErrOutcomeUnknown, conflict)}, exitFailed,
			"expected version 3, current version is 4 [version_conflict] (gave up after 2 attempts)", "may have been applied"},
		{"Unavailable", &client.EscalationError{Attempts: 5, Err: &contract.Error{Code: contract.EUnavailable, Message: "catching up"}}, exitServer,
			"catching up [partition_unavailable] (gave up after 5 attempts)", "kvctl's retries ran out"},
		{"Network", &client.EscalationError{Attempts: 5, Err: &client.NetworkError{Method: "GET", URL: defaultURL, Err: io.ErrUnexpectedEOF}}, exitServer,
			"cannot reach eskv at " + defaultURL + ": unexpected EOF (gave up after 5 attempts)", "is the stack running?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg, solution := a.explain(tc.err)
			if code != tc.code || msg != tc.msg || !strings.Contains(solution, tc.solution) {
				t.Fatalf("got %d %q %q, want %d %q and a solution with %q", code, msg, solution, tc.code, tc.msg, tc.solution)
			}
		})
	}
}

// TestExplainDeadLetter: an escalated update handed to its dead-letter
// queue keeps its exit code, and its Solution line names the queue and
// how to take the item; when the push failed too, the line says so.
func TestExplainDeadLetter(t *testing.T) {
	t.Parallel()
	const queue = scope + "triage"
	conflict := &contract.Error{Code: contract.EConflict, Field: "expectedVersion", Message: "expected version 3, current version is 4"}
	pushed := &client.EscalationError{Attempts: 7, Err: conflict, DeadLetter: queue}
	unpushed := &client.EscalationError{Attempts: 7, Err: conflict}
	for _, tc := range []struct {
		name     string
		err      error
		solution []string
	}{
		{"Pushed", pushed, []string{"handed to the dead-letter queue " + queue, "'kvctl queue pop " + queue + "'"}},
		{"PushFailed", errors.Join(unpushed, errors.New("client: dead-letter the update: forbidden")),
			[]string{"other writers kept changing " + key, "handing it to the dead-letter queue " + queue + " failed too (client: dead-letter the update: forbidden)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &app{stderr: io.Discard, url: defaultURL, cmdPath: "kvctl update", subject: key, deadLetter: queue}
			code, msg, solution := a.explain(tc.err)
			if code != exitFailed || !strings.Contains(msg, "gave up after 7 attempts") {
				t.Fatalf("got %d %q, want exit %d and the attempts", code, msg, exitFailed)
			}
			for _, want := range tc.solution {
				if !strings.Contains(solution, want) {
					t.Fatalf("solution %q lacks %q", solution, want)
				}
			}
		})
	}
}
