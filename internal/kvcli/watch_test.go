package kvcli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestWatchCLI runs kvctl watch as a process: it prints one line per
// change of its prefix (none of another), in json when piped and in
// text with --format text, resumes after --from, and exits 0 on SIGINT.
func TestWatchCLI(t *testing.T) {
	t.Parallel()
	st := stack.MustRun(t)
	k := &kvctlBin{path: mustBuild(t), env: map[string]string{"KVCTL_URL": st.URL, "KVCTL_TOKEN": stack.DevToken}, dir: t.TempDir()}
	c := client.New(st.URL, stack.DevToken)
	prefix := scope + "watch/"
	put := func(key, value string) {
		t.Helper()
		if _, err := c.Put(t.Context(), client.PutRequest{Key: key, Value: json.RawMessage(value)}); err != nil {
			t.Fatal(err)
		}
	}
	// watchLines starts kvctl watch, writes, and returns the first n
	// lines it prints, after interrupting it (exit 0).
	watchLines := func(t *testing.T, n int, write func(), args ...string) []string {
		t.Helper()
		cmd := k.command(nil, append([]string{"watch"}, args...)...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		before := st.Watches.Watches()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stack.WaitFor(t, "kvctl watch to start", func() bool { return st.Watches.Watches() > before })
		write()
		lines := make(chan string, n)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var got []string
		for len(got) < n {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("kvctl watch ended after %d lines: %s", len(got), stderr.String())
				}
				got = append(got, l)
			case <-time.After(30 * time.Second):
				t.Fatalf("kvctl watch printed %d lines in 30 s: %q", len(got), got)
			}
		}
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("kvctl watch after SIGINT: %v\n%s", err, stderr.String())
		}
		stack.WaitFor(t, "the server to end the watch", func() bool { return st.Watches.Watches() == before })
		return got
	}

	var first contract.WatchEvent
	t.Run("JSONWhenPiped", func(t *testing.T) {
		lines := watchLines(t, 2, func() {
			put(prefix+"a", `{"on":true}`)
			put(scope+"elsewhere", `1`)
			put(prefix+"b", `"x"`)
		}, prefix)
		var evs []contract.WatchEvent
		for _, l := range lines {
			var ev contract.WatchEvent
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			evs = append(evs, ev)
		}
		if evs[0].Key != prefix+"a" || string(evs[0].Value) != `{"on":true}` || evs[1].Key != prefix+"b" || evs[0].Version != 1 || evs[0].Principal != "dev" {
			t.Fatalf("events: %q", lines)
		}
		first = evs[0]
	})
	t.Run("TextFrom", func(t *testing.T) {
		lines := watchLines(t, 2, func() { put(prefix+"a", `2`) }, prefix, "--from", first.Cursor, "--format", "text")
		want := []string{
			fmt.Sprintf(" %sb@1 put/set \"x\"", prefix),
			fmt.Sprintf(" %sa@2 put/set 2", prefix),
		}
		for i, l := range lines {
			if !strings.HasPrefix(l, "p") || !strings.HasSuffix(l, want[i]) {
				t.Fatalf("line %d: %q, want CURSOR%s", i, l, want[i])
			}
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"Forbidden", []string{"watch", prefix, "--token", stack.WriterToken}, exitServer},
		{"BadCursor", []string{"watch", prefix, "--from", "yesterday"}, exitUsage},
		{"NotAPrefixOfAProject", []string{"watch", "tenant/acme/"}, exitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := k.run(t, "", nil, tc.args...); r.code != tc.code || r.stdout != "" {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
		})
	}
}
