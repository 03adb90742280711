package proc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// shell starts sh -c script as a process logging to a file in a temporary
// directory.
func shell(t *testing.T, script string) *Proc {
	t.Helper()
	dir := t.TempDir()
	p := New(Spec{Name: "sh", Path: "/bin/sh", Args: []string{"-c", script}, Dir: dir, Log: filepath.Join(dir, "sh.log"),
		Env: []string{"GREETING=hello"}})
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	return p
}

func TestKillAndStartAgain(t *testing.T) {
	p := shell(t, `echo "$GREETING $ESKV_SECRET"; exec sleep 60`)
	t.Setenv("ESKV_SECRET", "leaked")
	exited := make(chan error, 1)
	p.OnExit = func(err error) { exited <- err }
	if !p.Running() || p.PID() == 0 {
		t.Fatalf("state %v pid %d, want running", p.State(), p.PID())
	}
	if err := p.Start(); err == nil {
		t.Fatal("a second Start of a running process succeeded")
	}
	greeted := func(n int) func() bool {
		return func() bool { return strings.Count(Tail(p.Log, 1000, ""), "hello") == n }
	}
	if err := WaitFor(t.Context(), 5*time.Second, "a greeting", p, greeted(1)); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if p.Alive() || p.Err() == nil {
		t.Fatalf("after Kill: alive %v, err %v", p.Alive(), p.Err())
	}
	select {
	case err := <-exited:
		t.Fatalf("OnExit called after Kill: %v", err)
	default:
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(t.Context(), 5*time.Second, "two greetings", p, greeted(2)); err != nil {
		t.Fatal(err)
	}
	log := Tail(p.Log, 1000, "")
	if !strings.Contains(log, "=== proc: start #2 at ") || strings.Contains(log, "leaked") {
		t.Fatalf("log:\n%s", log)
	}
}

func TestPauseResumeStop(t *testing.T) {
	p := shell(t, `trap 'echo bye; exit 0' TERM; echo trapped; while :; do sleep 0.05; done`)
	if err := WaitFor(t.Context(), 5*time.Second, "the trap", p, func() bool { return Tail(p.Log, 100, "") != "" }); err != nil {
		t.Fatal(err)
	}
	p.Pause()
	if p.State() != Paused || p.Alive() != true || p.Running() {
		t.Fatalf("state %v after Pause", p.State())
	}
	p.Resume()
	if !p.Running() {
		t.Fatalf("state %v after Resume", p.State())
	}
	p.Pause()
	p.Stop(5 * time.Second) // resumes it first, else SIGTERM waits
	if p.Alive() || p.Err() != nil {
		t.Fatalf("after Stop: alive %v, err %v", p.Alive(), p.Err())
	}
}

func TestOnExitWhenItExitsOnItsOwn(t *testing.T) {
	dir := t.TempDir()
	exited := make(chan error, 1)
	p, err := Start(Spec{Name: "false", Path: "/bin/sh", Args: []string{"-c", "exit 3"}, Log: filepath.Join(dir, "x.log"),
		OnExit: func(err error) { exited <- err }})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err == nil || p.Alive() {
			t.Fatalf("err %v alive %v", err, p.Alive())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnExit not called")
	}
	err = WaitFor(t.Context(), time.Second, "nothing", p, func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "false exited") {
		t.Fatalf("WaitFor on an exited process: %v", err)
	}
}

func TestWaitAddrFile(t *testing.T) {
	p := shell(t, `sleep 0.2; echo 127.0.0.1:0 > addr; sleep 0.2; echo 127.0.0.1:4242 > addr; exec sleep 60`)
	addr, err := WaitAddrFile(t.Context(), 5*time.Second, p, filepath.Join(p.Dir, "addr"))
	if err != nil || addr != "127.0.0.1:4242" {
		t.Fatalf("got %q, %v", addr, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := WaitAddrFile(ctx, 5*time.Second, p, filepath.Join(p.Dir, "none")); err == nil {
		t.Fatal("want an error once ctx ends")
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "line %d\n", i)
		b.WriteString(`{"msg":"version conflict"}` + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Tail(path, 20, "version conflict"); got != "line 97\nline 98\nline 99\n" {
		t.Fatalf("%q", got)
	}
}

func TestFreePortsDiffer(t *testing.T) {
	ports, err := FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d twice in %v", p, ports)
		}
		seen[p] = true
	}
}
