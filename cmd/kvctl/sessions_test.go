package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/writer"
)

// Figures of TestSessionHoldProcesses.
const (
	holdProcesses = 100
	holdKilled    = 30
	holdTTL       = 3 * time.Second
	holdSweep     = time.Second
	// holdTolerance is what a loaded 2-core machine (100 kvctl processes
	// beside the stack, and other tests) may add to TTL + one sweep: a
	// late sweep round, a slow Kafka commit, the poll's own period.
	holdTolerance = 4 * time.Second
)

// TestSessionHoldProcesses: 100 real kvctl processes each hold a session
// (TTL 3 s) with one service key attached (kvctl session hold --put);
// after SIGKILL of 30 chosen at random, exactly their 30 keys disappear,
// each within TTL + one sweep interval (+ holdTolerance) of the kill,
// and the 70 others stay, also for a further TTL; SIGTERM of the 70
// revokes their sessions, and their keys go at once.
func TestSessionHoldProcesses(t *testing.T) {
	t.Parallel()
	st := stack.MustRun(t, stack.WriterConfig(func(c *writer.Config) { c.SweepInterval = holdSweep }))
	bin := filepath.Join(t.TempDir(), "kvctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := []string{"KVCTL_URL=" + st.URL, "KVCTL_TOKEN=" + stack.DevToken, "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	const base = "tenant/acme/project/demo/"
	keys := make([]string, holdProcesses)
	procs := make([]*exec.Cmd, holdProcesses)
	t.Cleanup(func() {
		for _, p := range procs {
			if p != nil && p.ProcessState == nil {
				_ = p.Process.Kill()
				_ = p.Wait()
			}
		}
	})
	for i := range holdProcesses {
		keys[i] = fmt.Sprintf("%sservices/web/%03d", base, i)
		p := exec.Command(bin, "session", "hold", fmt.Sprintf("%ssessions/web-%03d", base, i), "--ttl", holdTTL.String(),
			"--put", fmt.Sprintf(`%s={"addr":"10.0.%d.%d:80"}`, keys[i], i/256, i%256))
		p.Env, p.Dir = env, t.TempDir()
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = p
		if i%10 == 9 { // let each ten settle: 100 Go processes start on 2 cores
			time.Sleep(200 * time.Millisecond)
		}
	}
	c := client.New(st.URL, stack.DevToken)
	ctx := t.Context()
	live := func() map[string]bool {
		t.Helper()
		items, err := c.GetMany(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, it := range items {
			if it.Entry != nil {
				out[it.Key] = true
			}
		}
		return out
	}
	stack.WaitFor(t, "100 registered keys", func() bool { return len(live()) == holdProcesses })

	killed := rand.Perm(holdProcesses)[:holdKilled]
	slices.Sort(killed)
	kill := time.Now()
	for _, i := range killed {
		if err := procs[i].Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = procs[i].Wait()
	}
	gone := map[string]time.Duration{}
	deadline := kill.Add(holdTTL + holdSweep + holdTolerance)
	for len(gone) < holdKilled && time.Now().Before(deadline.Add(10*time.Second)) {
		l := live()
		for _, i := range killed {
			if _, seen := gone[keys[i]]; !seen && !l[keys[i]] {
				gone[keys[i]] = time.Since(kill)
			}
		}
		for i, k := range keys {
			if !slices.Contains(killed, i) && !l[k] {
				t.Fatalf("%s (process %d, alive) disappeared %v after the kill", k, i, time.Since(kill))
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	var last time.Duration
	for _, d := range gone {
		last = max(last, d)
	}
	t.Logf("figure: %d of %d killed processes' keys gone; the last %v after SIGKILL (bound TTL %v + sweep %v + tolerance %v = %v)",
		len(gone), holdKilled, last.Round(time.Millisecond), holdTTL, holdSweep, holdTolerance, holdTTL+holdSweep+holdTolerance)
	if len(gone) != holdKilled || last > holdTTL+holdSweep+holdTolerance {
		t.Fatalf("%d of %d killed keys gone, the last after %v; want all within %v", len(gone), holdKilled, last, holdTTL+holdSweep+holdTolerance)
	}
	time.Sleep(holdTTL + holdSweep)
	if l := live(); len(l) != holdProcesses-holdKilled {
		t.Fatalf("a further TTL later: %d keys live, want the %d of the processes alive", len(l), holdProcesses-holdKilled)
	}
	for i, p := range procs {
		if !slices.Contains(killed, i) {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
	}
	for i, p := range procs {
		if !slices.Contains(killed, i) {
			if err := p.Wait(); err != nil {
				t.Errorf("process %d after SIGTERM: %v", i, err)
			}
		}
	}
	if l := live(); len(l) != 0 {
		t.Fatalf("after SIGTERM of every holder (each revokes its session): %d keys live, want 0", len(l))
	}
}
