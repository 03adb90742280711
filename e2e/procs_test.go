package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// mustBinaries builds cmd/writer, cmd/projector, cmd/devbroker and
// cmd/auditor once per test run.
func mustBinaries(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "eskv-e2e-bin")
		if binErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "../cmd/writer", "../cmd/projector", "../cmd/devbroker", "../cmd/auditor")
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		tb.Fatal(binErr)
	}
	return binDir
}

// proc is a service process under test.
type proc struct {
	tb   testing.TB
	name string
	bin  string
	args []string
	env  []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startProc(tb testing.TB, name string, env ...string) *proc {
	tb.Helper()
	return startProcArgs(tb, name, nil, env...)
}

// startProcArgs starts the command name with arguments args (for example
// "auditor serve").
func startProcArgs(tb testing.TB, name string, args []string, env ...string) *proc {
	tb.Helper()
	p := &proc{tb: tb, name: name, bin: filepath.Join(mustBinaries(tb), name), args: args, env: env,
		log: filepath.Join(tb.TempDir(), name+".log")}
	p.start()
	tb.Cleanup(func() {
		p.stop()
		if dir := os.Getenv("ESKV_E2E_LOGDIR"); dir != "" {
			b, _ := os.ReadFile(p.log)
			_ = os.WriteFile(filepath.Join(dir, tb.Name()+"-"+name+".log"), b, 0o644)
		}
		if tb.Failed() {
			b, _ := os.ReadFile(p.log)
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			tb.Logf("--- %s log (tail) ---\n%s", name, b)
		}
	})
	return p
}

func (p *proc) start() {
	p.tb.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.tb.Fatal(err)
	}
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		p.tb.Fatal(err)
	}
	p.done = make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
}

// kill9 kills the process with SIGKILL: no shutdown code runs.
func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.kill9()
	}
}

func waitHTTP(tb testing.TB, url string, d time.Duration) {
	tb.Helper()
	waitFor(tb, d, url, func() bool {
		r, err := http.Get(url)
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == 200
	})
}
