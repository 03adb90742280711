package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/internal/proc"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// stopGrace is how long a stopped service may take to exit before SIGKILL.
const stopGrace = 20 * time.Second

// mustBinaries builds cmd/writer, cmd/projector, cmd/devbroker and
// cmd/auditor once per test run.
func mustBinaries(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "eskv-e2e-bin"); binErr == nil {
			binErr = proc.Build(context.Background(), "..", binDir, "./cmd/writer", "./cmd/projector", "./cmd/devbroker", "./cmd/auditor")
		}
	})
	if binErr != nil {
		tb.Fatal(binErr)
	}
	return binDir
}

func freeAddr(tb testing.TB) string {
	tb.Helper()
	ports, err := proc.FreePorts(1)
	if err != nil {
		tb.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0])
}

func startProc(tb testing.TB, name string, env ...string) *proc.Proc {
	tb.Helper()
	return startProcArgs(tb, name, nil, env...)
}

// startProcArgs starts the built command name with arguments args (for
// example "auditor serve") and env until the test ends; its log is copied
// to $ESKV_E2E_LOGDIR, and its tail shown when the test failed.
func startProcArgs(tb testing.TB, name string, args []string, env ...string) *proc.Proc {
	tb.Helper()
	p := proc.New(proc.Spec{Name: name, Path: filepath.Join(mustBinaries(tb), name), Args: args, Env: env,
		Log: filepath.Join(tb.TempDir(), name+".log")})
	mustStart(tb, p)
	tb.Cleanup(func() {
		p.Stop(stopGrace)
		if dir := os.Getenv("ESKV_E2E_LOGDIR"); dir != "" {
			b, _ := os.ReadFile(p.Log)
			_ = os.WriteFile(filepath.Join(dir, tb.Name()+"-"+name+".log"), b, 0o644)
		}
		if tb.Failed() {
			tb.Logf("--- %s log (tail) ---\n%s", name, proc.Tail(p.Log, 8000, ""))
		}
	})
	return p
}

// mustStart starts p (again).
func mustStart(tb testing.TB, p *proc.Proc) {
	tb.Helper()
	if err := p.Start(); err != nil {
		tb.Fatal(err)
	}
}

func waitHTTP(tb testing.TB, url string, d time.Duration) {
	tb.Helper()
	if err := proc.WaitHTTP(context.Background(), d, nil, url); err != nil {
		tb.Fatal(err)
	}
}
