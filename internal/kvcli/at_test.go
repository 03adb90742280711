package kvcli

import (
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/testenv/stack"
)

// TestCLIReadsAt: get --at and list --at (all pages) print the entries
// as they were at a time; a bad --at, and --at with --where, are usage
// errors (exit 2); a time in the future is refused by the server (exit 2).
func TestCLIReadsAt(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	k := &kvctlBin{path: mustBuild(t), env: map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_FORMAT": formatText}, dir: t.TempDir()}
	const p = "tenant/acme/project/demo/cli-at/"
	for _, args := range [][]string{{"set", p + "a", "1"}, {"set", p + "b", "1"}} {
		if r := k.run(t, "", nil, args...); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	time.Sleep(10 * time.Millisecond)
	then := time.Now().UTC().Format(time.RFC3339Nano)
	time.Sleep(10 * time.Millisecond)
	for _, args := range [][]string{{"set", p + "a", "2"}, {"delete", p + "b"}} {
		if r := k.run(t, "", nil, args...); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	if r := k.run(t, "", nil, "get", p+"a", "--at", then, "-o", "value"); r.code != 0 || r.stdout != "1\n" {
		t.Fatalf("get --at: %+v", r)
	}
	if r := k.run(t, "", nil, "list", p, "--at", then, "--limit", "1", "--all", "--format", "keys"); r.code != 0 || r.stdout != p+"a\n"+p+"b\n" {
		t.Fatalf("list --at --all: %+v", r)
	}
	for _, args := range [][]string{
		{"get", p + "a", "--at", "yesterday"},
		{"get", p + "a", "--at", "p1.o-5"},
		{"list", p, "--at", then, "--where", "n eq 1"},
		{"get", p + "a", "--at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
	} {
		if r := k.run(t, "", nil, args...); r.code != exitUsage || !strings.Contains(r.stderr, "at") {
			t.Errorf("%v: %+v, want exit 2", args, r)
		}
	}
}
