package kvcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/testenv/stack"
)

// background is a kvctl running while the test goes on.
type background struct {
	cmd            *exec.Cmd
	stdout, stderr testenv.Buffer
	done           chan struct{}
}

// start runs the binary in the background; wait collects it.
func (k *kvctlBin) start(tb testing.TB, env map[string]string, args ...string) *background {
	tb.Helper()
	b := &background{cmd: k.command(env, args...), done: make(chan struct{})}
	b.cmd.Stdout, b.cmd.Stderr = &b.stdout, &b.stderr
	if err := b.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() {
		_ = b.cmd.Wait()
		close(b.done)
	}()
	tb.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

// wait returns the run's result, failing the test after a minute.
func (b *background) wait(tb testing.TB) result {
	tb.Helper()
	select {
	case <-b.done:
	case <-time.After(time.Minute):
		tb.Fatalf("kvctl %v still runs after a minute\nstdout: %s\nstderr: %s", b.cmd.Args[1:], b.stdout.String(), b.stderr.String())
	}
	return result{stdout: b.stdout.String(), stderr: b.stderr.String(), code: b.cmd.ProcessState.ExitCode()}
}

func readFile(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		tb.Fatal(err)
	}
	return string(b)
}

// testLocks runs what golden files cannot show: waiting, lock run's
// exclusion, exit status, lost locks and signals.
func testLocks(t *testing.T, k *kvctlBin, c *client.Client) {
	ctx := t.Context()
	free := func(t *testing.T, key string) bool {
		t.Helper()
		_, err := c.CheckLock(ctx, key)
		return contract.ErrorCode(err) == contract.ENotFound
	}

	t.Run("DefaultHolderSpansInvocations", func(t *testing.T) {
		key := scope + "locks/script"
		env := map[string]string{"KVCTL_HOLDER": "", "USER": "tester"}
		host, _ := os.Hostname()
		r := k.run(t, "", env, "lock", "acquire", key, "--format", "json")
		var l client.Lock
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil || l.Holder != "tester@"+host {
			t.Fatalf("acquire: want holder tester@%s, got %+v", host, r)
		}
		if r := k.run(t, "", env, "lock", "release", key); r.code != 0 {
			t.Fatalf("release by a second kvctl of the same user and host: %+v", r)
		}
	})

	t.Run("AcquireWaitSucceedsOnRelease", func(t *testing.T) {
		key := scope + "locks/wait"
		if _, err := c.AcquireLock(ctx, client.LockRequest{Key: key, Holder: "first", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		b := k.start(t, nil, "lock", "acquire", key, "--holder", "second", "--wait", "40s", "--format", "json")
		stack.WaitFor(t, "kvctl to wait for the lock", func() bool { return strings.Contains(b.stderr.String(), "waiting up to 40s") })
		if _, err := c.ReleaseLock(ctx, client.LockRequest{Key: key, Holder: "first"}); err != nil {
			t.Fatal(err)
		}
		r := b.wait(t)
		var l client.Lock
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil || l.Holder != "second" || l.Reentered {
			t.Fatalf("acquire --wait after the release: %+v", r)
		}
	})

	t.Run("RunExitsWithStatusAndPassesToken", func(t *testing.T) {
		key := scope + "locks/status"
		r := k.run(t, "", nil, "lock", "run", key, "--", "sh", "-c", `echo "$KVCTL_LOCK_KEY $KVCTL_LOCK_HOLDER $KVCTL_LOCK_TOKEN"; exit 7`)
		want := regexp.MustCompile(`^` + regexp.QuoteMeta(key) + ` [^ /]+@[^ /]+/\d+ \d+\n$`)
		if r.code != 7 || !want.MatchString(r.stdout) || r.stderr != "" {
			t.Fatalf("want exit 7 and KEY USER@HOST/PID TOKEN on stdout, got %+v", r)
		}
		if !free(t, key) {
			t.Fatal("the lock is still held after lock run")
		}
		if r := k.run(t, "", nil, "lock", "run", key, "--", "true"); r.code != 0 {
			t.Fatalf("lock run true: %+v", r)
		}
		if r := k.run(t, "", nil, "lock", "run", key, "--", "sh", "-c", "kill -TERM $$"); r.code != 128+15 {
			t.Fatalf("lock run of a command killed by SIGTERM: want exit 143, got %+v", r)
		}
	})

	t.Run("RunExcludesConcurrentRuns", func(t *testing.T) {
		key := scope + "locks/exclusive"
		log := filepath.Join(t.TempDir(), "log")
		// Each run outlasts an extend (every --ttl/3); the lease leaves
		// slack for a loaded machine.
		script := `echo "start $1 $(date +%s%N)" >> "$2"; sleep 2.5; echo "end $1 $(date +%s%N)" >> "$2"`
		var runs []*background
		for _, name := range []string{"a", "b", "c"} {
			runs = append(runs, k.start(t, nil, "lock", "run", key, "--wait", "40s", "--ttl", "6s", "--", "sh", "-c", script, "sh", name, log))
		}
		for _, b := range runs {
			if r := b.wait(t); r.code != 0 {
				t.Fatalf("lock run: %+v", r)
			}
		}
		type span struct{ start, end int64 }
		spans := map[string]*span{}
		sc := bufio.NewScanner(strings.NewReader(readFile(t, log)))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			ns, err := strconv.ParseInt(f[2], 10, 64)
			if len(f) != 3 || err != nil {
				t.Fatalf("bad log line %q", sc.Text())
			}
			if spans[f[1]] == nil {
				spans[f[1]] = &span{}
			}
			if f[0] == "start" {
				spans[f[1]].start = ns
			} else {
				spans[f[1]].end = ns
			}
		}
		if len(spans) != 3 {
			t.Fatalf("want 3 runs in the log, got:\n%s", readFile(t, log))
		}
		for a, x := range spans {
			if x.start == 0 || x.end < x.start {
				t.Fatalf("run %s did not start and end:\n%s", a, readFile(t, log))
			}
			for b, y := range spans {
				if a < b && x.start < y.end && y.start < x.end {
					t.Fatalf("runs %s and %s overlap:\n%s", a, b, readFile(t, log))
				}
			}
		}
	})

	t.Run("RunStopsCommandWhenLockIsLost", func(t *testing.T) {
		key := scope + "locks/lost"
		marks := filepath.Join(t.TempDir(), "marks")
		b := k.start(t, nil, "lock", "run", key, "--ttl", "3s", "--grace", "1s", "--",
			"sh", "-c", `trap 'echo term >> "$1"; exit 143' TERM; echo started >> "$1"; sleep 60 & wait`, "sh", marks)
		stack.WaitFor(t, "the command to start", func() bool { return strings.Contains(readFile(t, marks), "started") })
		l, err := c.CheckLock(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		// An operator breaks the lock on purpose.
		if _, err := c.Delete(ctx, key, client.DeleteOptions{ExpectedVersion: &l.Version}); err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		r := b.wait(t)
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "Error: lost the lock "+key) || !strings.Contains(r.stderr, "[not_lock_holder]") ||
			!strings.Contains(r.stderr, "\nSolution: ") {
			t.Fatalf("want exit 4 with Error/Solution after the lock was broken, got %+v", r)
		}
		t.Logf("lock run after the lock was broken:\n%s", r.stderr)
		if !strings.Contains(readFile(t, marks), "term") {
			t.Fatalf("the command did not get SIGTERM: %q", readFile(t, marks))
		}
		if d := time.Since(started); d > 20*time.Second {
			t.Fatalf("the command was stopped only %v after the lock was lost", d)
		}
	})

	t.Run("RunForwardsSignals", func(t *testing.T) {
		key := scope + "locks/signal"
		marks := filepath.Join(t.TempDir(), "marks")
		b := k.start(t, nil, "lock", "run", key, "--",
			"sh", "-c", `trap 'echo int >> "$1"; kill $!; exit 3' INT; echo started >> "$1"; sleep 60 & wait`, "sh", marks)
		stack.WaitFor(t, "the command to start", func() bool { return strings.Contains(readFile(t, marks), "started") })
		if err := b.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if r := b.wait(t); r.code != 3 || !strings.Contains(readFile(t, marks), "int") {
			t.Fatalf("want the command's exit 3 after SIGINT, got %+v, marks %q", r, readFile(t, marks))
		}
		if !free(t, key) {
			t.Fatal("the lock is still held after an interrupted lock run")
		}
	})

	t.Run("Completion", func(t *testing.T) {
		r := k.run(t, "", nil, "__complete", "lock", "acquire", scope+"locks/")
		if r.code != 0 || !strings.Contains(r.stdout, scope+"locks/script\n") && !strings.Contains(r.stdout, scope+"locks/wait\n") {
			t.Fatalf("lock key completion: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = k.run(t, "", nil, "__complete", "field", "get", scope+"tasks/1", "")
		if r.code != 0 || !strings.Contains(r.stdout, "state\n") || !strings.Contains(r.stdout, "attempts\n") {
			t.Fatalf("field completion: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = k.run(t, "", nil, "__complete", "field", "set", scope+"tasks/1", "st")
		if r.code != 0 || !strings.Contains(r.stdout, "state=\n") {
			t.Fatalf("field set completion: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

func TestFieldValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"42", "42"},
		{"true", "true"},
		{"null", "null"},
		{`"quoted"`, `"quoted"`},
		{`{ "a": [1, 2] }`, `{"a":[1,2]}`},
		{"claimed", `"claimed"`},
		{"007", `"007"`},
		{"", `""`},
		{"a <b> & c", `"a <b> & c"`},
		{"{not json", `"{not json"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := string(fieldValue(tc.in)); got != tc.want {
				t.Fatalf("fieldValue(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

// TestTake runs the --wait loop on a fake lock in virtual time.
func TestTake(t *testing.T) {
	t.Parallel()
	held := func(until time.Time) error {
		return &contract.Error{Code: contract.ELockHeld, Message: "lock is held by other", Field: "holder",
			Current: &contract.Entry{Version: 3, Value: json.RawMessage(`{"holder":"other"}`), ExpiresAt: &until}}
	}
	for _, tc := range []struct {
		name     string
		wait     time.Duration
		freeIn   time.Duration // when the lock frees
		leaseEnd time.Duration // the lease's end the server reports
		ok       bool
		maxTries int
	}{
		{name: "FreesBeforeDeadline", wait: 30 * time.Second, freeIn: 5 * time.Second, leaseEnd: time.Hour, ok: true, maxTries: 12},
		{name: "WakesAtLeaseEnd", wait: 30 * time.Second, freeIn: 20 * time.Second, leaseEnd: 20 * time.Second, ok: true, maxTries: 30},
		{name: "ErrStillHeld", wait: 10 * time.Second, freeIn: time.Hour, leaseEnd: time.Hour, maxTries: 15},
		{name: "ErrNoWait", wait: 0, freeIn: time.Hour, leaseEnd: time.Hour, maxTries: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var stderr bytes.Buffer
				a := &app{stderr: &stderr}
				start := time.Now()
				tries := 0
				l, err := a.take(context.Background(), tc.wait, contract.ELockHeld, false, func(context.Context, time.Duration) (client.Lock, error) {
					tries++
					if time.Since(start) >= tc.freeIn {
						return client.Lock{Holder: "me", Token: 4}, nil
					}
					return client.Lock{}, held(start.Add(tc.leaseEnd))
				})
				elapsed := time.Since(start)
				if tc.ok != (err == nil) || (tc.ok && l.Holder != "me") {
					t.Fatalf("take: %+v, %v", l, err)
				}
				if tries > tc.maxTries {
					t.Fatalf("%d tries, want at most %d (the backoff does not grow)", tries, tc.maxTries)
				}
				switch {
				case tc.ok && elapsed > tc.freeIn+2*time.Second:
					t.Fatalf("took the lock %v after it freed", elapsed-tc.freeIn)
				case !tc.ok && (elapsed < tc.wait || elapsed > tc.wait+time.Second):
					t.Fatalf("gave up after %v, want %v", elapsed, tc.wait)
				case !tc.ok && tc.wait > 0 && a.waited != tc.wait:
					t.Fatalf("a.waited = %v", a.waited)
				}
				if tc.wait > 0 && !strings.Contains(stderr.String(), fmt.Sprintf("waiting up to %v", tc.wait)) {
					t.Fatalf("no waiting note: %q", stderr.String())
				}
			})
		})
	}
}

// TestLockRunLost turns each way a lease ends into lock run's error.
func TestLockRunLost(t *testing.T) {
	t.Parallel()
	const key = "tenant/acme/project/demo/locks/nightly"
	refused := &contract.Error{Code: contract.ENotLockHolder, Message: "lock " + key + " is free: me does not hold it"}
	unavailable := &contract.Error{Code: contract.EUnavailable, Message: "partition 1 is catching up; retry"}
	for _, tc := range []struct {
		name string
		err  error // the lease's Err
		want string
	}{
		{name: "Released", err: client.ErrLeaseReleased},
		{name: "Refused", err: &client.LostError{Key: key, Token: 4, Err: refused},
			want: "lost the lock " + key + " while CMD ran: lock " + key + " is free: me does not hold it [not_lock_holder]; CMD was stopped (exit status 143)"},
		{name: "Unconfirmed", err: &client.LostError{Key: key, Token: 4, Err: unavailable, Unconfirmed: true},
			want: "lost the lock " + key + " while CMD ran: no extend got through before the lease (--ttl 30s) was about to end; last error: partition 1 is catching up; retry [partition_unavailable]; CMD was stopped (exit status 143)"},
		{name: "NewTenure", err: &client.LostError{Key: key, Token: 4, NewToken: 9},
			want: "lost the lock " + key + " while CMD ran: the lock's token is 9 now, not 4: it was released and taken again; CMD was stopped (exit status 143)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &app{}
			r := &lockRun{a: a, key: key, lease: 30 * time.Second}
			lost := r.lost(tc.err, 143, true)
			if tc.want == "" {
				if lost != nil {
					t.Fatalf("lost = %+v, want nil", lost)
				}
				return
			}
			code, msg, solution := a.explain(lost)
			if code != exitUnavailable || msg != tc.want || solution == "" || lost.transient != tc.err.(*client.LostError).Unconfirmed {
				t.Fatalf("explain: %d %q %q", code, msg, solution)
			}
		})
	}
}

// TestTakeServerWait: with the server's wait, take asks the server to
// hold each try (what is left of --wait, at most contract.MaxWait) after
// a first try that names the holder, and sleeps only when the server
// answered at once (a server that ignores the wait).
func TestTakeServerWait(t *testing.T) {
	t.Parallel()
	held := func(until time.Time) error {
		return &contract.Error{Code: contract.ELockHeld, Message: "lock is held by other", Field: "holder",
			Current: &contract.Entry{Version: 3, Value: json.RawMessage(`{"holder":"other"}`), ExpiresAt: &until}}
	}
	for _, tc := range []struct {
		name     string
		honours  bool // the server holds a try as long as asked (until the lock frees)
		wait     time.Duration
		freeIn   time.Duration
		ok       bool
		maxTries int
	}{
		{name: "OKGrantedInOneWait", honours: true, wait: 20 * time.Second, freeIn: 5 * time.Second, ok: true, maxTries: 2},
		{name: "OKLongWaitAsksAgain", honours: true, wait: 50 * time.Second, freeIn: 40 * time.Second, ok: true, maxTries: 3},
		{name: "ErrStillHeld", honours: true, wait: 10 * time.Second, freeIn: time.Hour, maxTries: 2},
		{name: "ErrIgnoredWaitBacksOff", honours: false, wait: 10 * time.Second, freeIn: time.Hour, maxTries: 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := &app{stderr: &bytes.Buffer{}}
				start := time.Now()
				tries := 0
				var asked []time.Duration
				l, err := a.take(context.Background(), tc.wait, contract.ELockHeld, true, func(_ context.Context, wait time.Duration) (client.Lock, error) {
					tries++
					asked = append(asked, wait)
					if wait > contract.MaxWait {
						t.Fatalf("asked the server for %v", wait)
					}
					if tc.honours {
						time.Sleep(min(wait, max(tc.freeIn-time.Since(start), 0)))
					}
					if time.Since(start) >= tc.freeIn {
						return client.Lock{Holder: "me", Token: 4}, nil
					}
					return client.Lock{}, held(start.Add(time.Hour))
				})
				if tc.ok != (err == nil) || (tc.ok && l.Holder != "me") {
					t.Fatalf("take: %+v, %v", l, err)
				}
				if tries > tc.maxTries || asked[0] != 0 {
					t.Fatalf("%d tries asking %v, want at most %d, the first asking none", tries, asked, tc.maxTries)
				}
				if elapsed := time.Since(start); !tc.ok && (elapsed < tc.wait || elapsed > tc.wait+time.Second) {
					t.Fatalf("gave up after %v, want %v", elapsed, tc.wait)
				}
			})
		})
	}
}
