package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/testenv"
)

// auditKeyHex is the audit key of the e2e tests (id e2e).
const auditKeyHex = "5f3c0a9e1b7d2c4e6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"

func auditKeys(tb testing.TB) *audit.Keyring {
	tb.Helper()
	k, err := audit.ParseKey("e2e:" + auditKeyHex)
	if err != nil {
		tb.Fatal(err)
	}
	kr, err := audit.NewKeyring(k)
	if err != nil {
		tb.Fatal(err)
	}
	return kr
}

// auditTrail is a fresh, migrated ClickHouse database for a stack's
// auditor.
type auditTrail struct {
	ch    *testenv.ClickHouse
	store *audit.Store
	keys  *audit.Keyring
}

func mustAuditTrail(tb testing.TB) *auditTrail {
	tb.Helper()
	ch := testenv.MustClickHouse(tb)
	st := audit.NewStore(ch.Conn)
	if err := st.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return &auditTrail{ch: ch, store: st, keys: auditKeys(tb)}
}

// startAuditor runs an in-process auditor on the stack's broker until the
// test ends.
func (at *auditTrail) startAuditor(tb testing.TB, s *stack) {
	tb.Helper()
	a, err := audit.New(audit.Config{Brokers: s.broker.Addrs, Topics: s.broker.Topics, Linger: 20 * time.Millisecond},
		at.store, at.keys, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("auditor: %v", err)
		}
	})
}

// waitAudited waits until the auditor group has committed the last stable
// offset of every partition of both topics.
func waitAudited(tb testing.TB, s *stack, d time.Duration) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.broker.Addrs...))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ends := map[string]map[int32]int64{}
	for _, t := range []string{s.broker.Topics.Changes, s.broker.Topics.Conflicts} {
		ends[t] = testenv.EndOffsets(ctx, tb, cl, t)
	}
	waitFor(tb, d, "the auditor to commit the end of both topics", func() bool {
		fo, err := adm.FetchOffsets(ctx, audit.Group)
		if err != nil {
			return false
		}
		for t, ps := range ends {
			for p, end := range ps {
				o, ok := fo.Lookup(t, p)
				if end > 0 && (!ok || o.At < end) {
					return false
				}
			}
		}
		return true
	})
}

func (at *auditTrail) verify(tb testing.TB, s *stack) *audit.VerifyReport {
	tb.Helper()
	rep, err := audit.Verify(context.Background(), at.store, at.keys, audit.VerifyConfig{Brokers: s.broker.Addrs, Topics: s.broker.Topics})
	if err != nil {
		tb.Fatal(err)
	}
	return rep
}

// mutate runs an ALTER TABLE ... UPDATE or DELETE and waits until it is
// done.
func (at *auditTrail) mutate(tb testing.TB, q string, args ...any) {
	tb.Helper()
	if err := at.ch.Conn.Exec(context.Background(), q, args...); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	waitFor(tb, 30*time.Second, "mutation "+q, func() bool {
		return at.count(tb, "SELECT count() FROM system.mutations WHERE database = currentDatabase() AND is_done = 0") == 0
	})
}

func (at *auditTrail) count(tb testing.TB, q string, args ...any) uint64 {
	tb.Helper()
	var n uint64
	if err := at.ch.Conn.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	return n
}

var (
	auditorOnce sync.Once
	auditorBin  string
	auditorErr  error
)

// mustAuditorBinary builds cmd/auditor once per test run.
func mustAuditorBinary(tb testing.TB) string {
	tb.Helper()
	auditorOnce.Do(func() {
		dir, err := os.MkdirTemp("", "eskv-e2e-auditor")
		if err != nil {
			auditorErr = err
			return
		}
		auditorBin = filepath.Join(dir, "auditor")
		out, err := exec.Command("go", "build", "-o", auditorBin, "../cmd/auditor").CombinedOutput()
		if err != nil {
			auditorErr = fmt.Errorf("go build ../cmd/auditor: %v\n%s", err, out)
		}
	})
	if auditorErr != nil {
		tb.Fatal(auditorErr)
	}
	return auditorBin
}

// auditorProc is `auditor serve` as a process.
type auditorProc struct {
	tb   testing.TB
	env  []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startAuditorProc(tb testing.TB, env ...string) *auditorProc {
	tb.Helper()
	p := &auditorProc{tb: tb, env: env, log: filepath.Join(tb.TempDir(), "auditor.log")}
	p.start()
	tb.Cleanup(func() {
		p.stop()
		if tb.Failed() {
			b, _ := os.ReadFile(p.log)
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			tb.Logf("--- auditor log (tail) ---\n%s", b)
		}
	})
	return p
}

func (p *auditorProc) start() {
	p.tb.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.tb.Fatal(err)
	}
	p.cmd = exec.Command(mustAuditorBinary(p.tb), "serve")
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

func (p *auditorProc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *auditorProc) stop() {
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
