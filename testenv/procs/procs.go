// Package procs runs eskv's services as processes for tests: it builds
// the commands once per test binary, starts them on free ports until the
// test ends (their logs copied to $ESKV_E2E_LOGDIR, their tails shown
// when the test failed), and starts a projector and writers on one
// broker and one database (MustWriters). The end-to-end tests (e2e/) and
// the clients' conformance harness (conformance/) share it.
package procs

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

// StopGrace is how long a stopped service may take to exit before
// SIGKILL.
const StopGrace = 20 * time.Second

// PeerSecret is the writers' shared forwarding secret
// (ESKV_PEER_SECRET), as the chart sets it from its Secret.
const PeerSecret = "e2e-peer-secret-0123456789abcdef0123456789abcdef"

// module is the eskv module's import path: the commands are built in its
// directory.
const module = "github.com/eskv/eskv"

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// Binaries builds cmd/writer, cmd/projector, cmd/devbroker and
// cmd/auditor once per test binary run and returns their directory.
func Binaries(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(build)
	if binErr != nil {
		tb.Fatal(binErr)
	}
	return binDir
}

// Prebuild starts building the commands (Binaries) in the background, so
// that a TestMain overlaps the build, tens of seconds on a loaded
// machine, with the tests that need no process; the first test that
// calls Binaries waits for it and fails if it failed.
func Prebuild() { go binOnce.Do(build) }

// build builds the commands into binDir, or sets binErr.
func build() {
	dir, err := proc.ModuleDir(context.Background(), module)
	if err != nil {
		binErr = err
		return
	}
	if binDir, binErr = os.MkdirTemp("", "eskv-e2e-bin"); binErr == nil {
		binErr = proc.Build(context.Background(), dir, binDir, "./cmd/writer", "./cmd/projector", "./cmd/devbroker", "./cmd/auditor")
	}
}

// FreeAddr returns 127.0.0.1:<a free port>.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ports, err := proc.FreePorts(1)
	if err != nil {
		tb.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0])
}

// Start starts the built command name (Binaries) with arguments args
// (for example "auditor serve") and env until the test ends; its log is
// copied to $ESKV_E2E_LOGDIR, and its tail shown when the test failed.
func Start(tb testing.TB, name string, args []string, env ...string) *proc.Proc {
	tb.Helper()
	p := proc.New(proc.Spec{Name: name, Path: filepath.Join(Binaries(tb), name), Args: args, Env: env,
		Log: filepath.Join(tb.TempDir(), name+".log")})
	MustStart(tb, p)
	tb.Cleanup(func() {
		p.Stop(StopGrace)
		if dir := os.Getenv("ESKV_E2E_LOGDIR"); dir != "" {
			b, _ := os.ReadFile(p.Log)
			_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(tb.Name(), "/", "_")+"-"+name+".log"), b, 0o644)
		}
		if tb.Failed() {
			tb.Logf("--- %s log (tail) ---\n%s", name, proc.Tail(p.Log, 8000, ""))
		}
	})
	return p
}

// MustStart starts p (again).
func MustStart(tb testing.TB, p *proc.Proc) {
	tb.Helper()
	if err := p.Start(); err != nil {
		tb.Fatal(err)
	}
}

// WaitHTTP waits up to d until GET url answers 200.
func WaitHTTP(tb testing.TB, url string, d time.Duration) {
	tb.Helper()
	if err := proc.WaitHTTP(context.Background(), d, nil, url); err != nil {
		tb.Fatal(err)
	}
}

// Env is the environment every service process on broker and pg shares:
// the broker, the database and the partition count, the writers' peer
// secret, logging at warn.
func Env(broker *testenv.Broker, pg *testenv.Postgres, partitions int) []string {
	return []string{
		"ESKV_PEER_SECRET=" + PeerSecret,
		"ESKV_BROKERS=" + strings.Join(broker.Addrs, ","),
		"ESKV_POSTGRES_URL=" + pg.URL,
		fmt.Sprintf("ESKV_PARTITIONS=%d", partitions),
		"ESKV_LOG_LEVEL=warn",
	}
}

// Config is what MustWriters starts.
type Config struct {
	Writers    int // writers w0, w1, ...
	Partitions int // of the topics
	// WriterEnv is added to each writer's environment: its tokens
	// (ESKV_DEV_TOKEN, ESKV_TOKENS_FILE) at least.
	WriterEnv []string
}

// Writers is eskv as processes on one broker and database: a projector
// and writers w0, w1, ... (each forwarding to the others).
type Writers struct {
	Broker    *testenv.Broker
	PG        *testenv.Postgres
	Store     *projection.Store
	Projector *proc.Proc
	Procs     []*proc.Proc // the writers, w0 first
	URLs      []string     // each writer's base URL
	// Partitions is the topics' partition count.
	Partitions int
}

// MustWriters starts a projector and c.Writers writers as processes on a
// new broker and database until the test ends, and returns once every
// writer answers and every partition has an owner.
func MustWriters(tb testing.TB, c Config) *Writers {
	tb.Helper()
	ws := &Writers{Broker: testenv.MustBroker(tb, int32(c.Partitions)), PG: testenv.MustPostgresDB(tb), Partitions: c.Partitions}
	ws.Store = projection.New(ws.PG.Pool)
	common := Env(ws.Broker, ws.PG, c.Partitions)
	ws.Projector = Start(tb, "projector", nil, append(common, "ESKV_PROJECTOR_ADDR="+FreeAddr(tb))...)
	for i := range c.Writers {
		addr := FreeAddr(tb)
		for slices.Contains(ws.URLs, "http://"+addr) {
			addr = FreeAddr(tb)
		}
		env := append(slices.Clone(common), "ESKV_HTTP_ADDR="+addr, fmt.Sprintf("ESKV_WRITER_ID=w%d", i))
		ws.Procs = append(ws.Procs, Start(tb, "writer", nil, append(env, c.WriterEnv...)...))
		ws.URLs = append(ws.URLs, "http://"+addr)
	}
	for _, u := range ws.URLs {
		WaitHTTP(tb, u+"/healthz", 60*time.Second)
	}
	ws.WaitOwned(tb, 60*time.Second)
	return ws
}

// WaitOwned waits up to d until every partition has an owner.
func (ws *Writers) WaitOwned(tb testing.TB, d time.Duration) {
	tb.Helper()
	testenv.WaitFor(tb, d, "every partition owned", func() bool {
		owners, err := ws.Store.Owners(context.Background())
		return err == nil && len(owners) == ws.Partitions
	})
}
