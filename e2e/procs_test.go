package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
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

// writersStack is eskv as processes on one broker and database: a
// projector and writers w0, w1, ... (each forwarding to the others).
type writersStack struct {
	*stack
	writers []*proc.Proc
	urls    []string // each writer's base URL
}

// mustWriterProcs starts a projector and n writers as processes until the
// test ends, and returns once every writer answers and every partition
// has an owner.
func mustWriterProcs(tb testing.TB, n int) *writersStack {
	tb.Helper()
	broker := testenv.MustBroker(tb, partitions)
	ps := &writersStack{stack: &stack{tb: tb, broker: broker, pg: testenv.MustPostgresDB(tb)}}
	ps.store = projection.New(ps.pg.Pool)
	common := procEnv(ps.stack)
	startProc(tb, "projector", append(common, "ESKV_PROJECTOR_ADDR="+freeAddr(tb))...)
	for i := range n {
		addr := freeAddr(tb)
		for slices.Contains(ps.urls, "http://"+addr) {
			addr = freeAddr(tb)
		}
		ps.writers = append(ps.writers, startProc(tb, "writer", append(common,
			"ESKV_HTTP_ADDR="+addr, "ESKV_DEV_TOKEN="+devToken, fmt.Sprintf("ESKV_WRITER_ID=w%d", i))...))
		ps.urls = append(ps.urls, "http://"+addr)
	}
	for _, u := range ps.urls {
		waitHTTP(tb, u+"/healthz", 60*time.Second)
	}
	// Every partition owned and caught up by someone.
	testenv.WaitFor(tb, 60*time.Second, "every partition owned", func() bool {
		owners, err := ps.store.Owners(context.Background())
		return err == nil && len(owners) == partitions
	})
	return ps
}

// peerSecret is the writers' shared forwarding secret in the process
// stacks (ESKV_PEER_SECRET), as the chart sets it from its Secret.
const peerSecret = "e2e-peer-secret-0123456789abcdef0123456789abcdef"

// procEnv is the environment every service process of s shares: its
// broker, database and partition count, the writers' peer secret, logging
// at warn.
func procEnv(s *stack) []string {
	return []string{
		"ESKV_PEER_SECRET=" + peerSecret,
		"ESKV_BROKERS=" + strings.Join(s.broker.Addrs, ","),
		"ESKV_POSTGRES_URL=" + s.pg.URL,
		fmt.Sprintf("ESKV_PARTITIONS=%d", partitions),
		"ESKV_LOG_LEVEL=warn",
	}
}
