package e2e

import (
	"testing"
	"time"

	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/testenv/procs"
)

// stopGrace is how long a stopped service may take to exit before SIGKILL.
const stopGrace = procs.StopGrace

func freeAddr(tb testing.TB) string { tb.Helper(); return procs.FreeAddr(tb) }

func startProc(tb testing.TB, name string, env ...string) *proc.Proc {
	tb.Helper()
	return procs.Start(tb, name, nil, env...)
}

// startProcArgs starts the built command name with arguments args (for
// example "auditor serve") and env until the test ends (procs.Start).
func startProcArgs(tb testing.TB, name string, args []string, env ...string) *proc.Proc {
	tb.Helper()
	return procs.Start(tb, name, args, env...)
}

// mustStart starts p (again).
func mustStart(tb testing.TB, p *proc.Proc) { tb.Helper(); procs.MustStart(tb, p) }

func waitHTTP(tb testing.TB, url string, d time.Duration) { tb.Helper(); procs.WaitHTTP(tb, url, d) }

// writersStack is eskv as processes on one broker and database: a
// projector and writers w0, w1, ... (each forwarding to the others).
type writersStack struct {
	*stack
	writers []*proc.Proc
	urls    []string // each writer's base URL
}

// mustWriterProcs starts a projector and n writers as processes until the
// test ends (procs.MustWriters), and returns once every writer answers
// and every partition has an owner.
func mustWriterProcs(tb testing.TB, n int) *writersStack {
	tb.Helper()
	ws := procs.MustWriters(tb, procs.Config{Writers: n, Partitions: partitions, WriterEnv: []string{"ESKV_DEV_TOKEN=" + devToken}})
	return &writersStack{stack: &stack{tb: tb, broker: ws.Broker, pg: ws.PG, store: ws.Store}, writers: ws.Procs, urls: ws.URLs}
}

// procEnv is the environment every service process of s shares: its
// broker, database and partition count, the writers' peer secret, logging
// at warn.
func procEnv(s *stack) []string { return procs.Env(s.broker, s.pg, partitions) }
