package kvcli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/testenv/stack"
)

// TestIndexes: kvctl indexes reads and changes a project's declared
// field indexes, and status follows a field declared over existing keys
// from building to ready; refusals carry a Solution line. The cases run
// in order.
func TestIndexes(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.DevToken)
	ctx := t.Context()
	const project = "tenant/acme/project/indexes"
	for _, k := range []string{"a", "b", "c"} {
		if _, err := c.Put(ctx, client.PutRequest{Key: project + "/jobs/" + k, Value: json.RawMessage(`{"state":"queued","owner":"w1"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_FORMAT": formatText}
	kvctl := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append([]string{"indexes"}, args...), func(k string) string { return env[k] }, stdio{strings.NewReader(""), &stdout, &stderr})
		return code, stdout.String(), stderr.String()
	}
	for _, tc := range []struct {
		name         string
		args         []string
		code         int
		stdout, errs string
	}{
		{"OKStatusOfNone", []string{"status", project, "-o", "json"}, exitOK, `{"scope":"` + project + `","version":0,"fields":[]}`, ""},
		{"OKAdd", []string{"add", project, "state"}, exitOK, "state\n", ""},
		{"OKAddAnother", []string{"add", project, "owner"}, exitOK, "owner\nstate\n", ""},
		{"OKGetJSON", []string{"get", project, "-o", "json"}, exitOK, `{"fields":["owner","state"],"version":2}`, ""},
		{"OKStatusReader", []string{"status", project, "--token", stack.ReaderToken}, exitOK, "owner\t", ""},
		{"OKDrop", []string{"drop", project, "owner"}, exitOK, "state\n", ""},
		{"ErrNotAProject", []string{"status", "tenant/acme"}, exitUsage, "", "Solution: give the project as tenant/<tenant>/project/<project>"},
		{"ErrBadField", []string{"add", project, strings.Repeat("f", 300)}, exitUsage, "", "Solution: declare at most 16 distinct fields"},
		{"ErrReadOnlyToken", []string{"add", project, "x", "--token", stack.ReaderToken}, exitServer, "", `rights include "write"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := kvctl(tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.errs) {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d stdout with %q stderr with %q",
					code, stdout, stderr, tc.code, tc.stdout, tc.errs)
			}
		})
	}
	// state, declared over three keys, is backfilled to ready.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, stdout, stderr := kvctl("status", project)
		if code != exitOK || (stdout != "state\tbuilding\n" && stdout != "state\tready\n") {
			t.Fatalf("status: exit %d stdout %q stderr %q", code, stdout, stderr)
		}
		if stdout == "state\tready\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("state still building after 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
