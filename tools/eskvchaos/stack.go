package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/internal/localstack"
	"github.com/eskv/eskv/projection"
)

// stack is the system under test, as processes the harness started.
type stack struct {
	dir      string // run directory: binaries, logs, broker data, findings
	bin      string
	adminURL string
	dbName   string
	dbURL    string
	db       *pgxpool.Pool
	store    *projection.Store
	token    string
	topics   changelog.Topics
	brokers  string

	broker     *proc
	writers    []*proc
	projectors []*proc

	t0       time.Time // the harness's clock starts here
	progress io.Writer
	pmu      sync.Mutex
	hlog     *os.File // progress lines, also kept in the run directory

	closing chan struct{}
	sup     sync.WaitGroup // restarts after unexpected exits
	umu     sync.Mutex
	exits   []string // unexpected exits, described
}

// procState is what the harness did to a process last.
type procState int

const (
	stateRunning procState = iota
	statePaused
	stateDead
)

// proc is one service process; it can be killed, paused and started again
// with the same settings (ports, instance id, data directory).
type proc struct {
	s    *stack
	name string
	bin  string
	env  []string
	log  string
	url  string // base URL of its HTTP listener ("" for the broker)

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	state    procState
	intended bool // the harness caused the current process to exit
	starts   int
}

// logf prints a progress line with the harness's clock.
func (s *stack) logf(format string, args ...any) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	line := fmt.Sprintf("eskvchaos: %6.1fs %s\n", time.Since(s.t0).Seconds(), fmt.Sprintf(format, args...))
	io.WriteString(s.progress, line)
	if s.hlog != nil {
		s.hlog.WriteString(line)
	}
}

// startStack builds the services, creates a database and the topics,
// starts broker, projectors and writers on free ports and waits until every
// partition is owned by a ready writer. On error everything started is
// stopped again.
func startStack(ctx context.Context, c config, progress io.Writer) (_ *stack, err error) {
	s := &stack{adminURL: c.adminPostgresURL, progress: progress, t0: time.Now(), closing: make(chan struct{})}
	defer func() {
		if err != nil {
			s.printLogTails(progress)
			s.close(progress, false)
		}
	}()
	if s.dir, err = os.MkdirTemp("", "eskvchaos-"); err != nil {
		return nil, err
	}
	if s.hlog, err = os.Create(filepath.Join(s.dir, "harness.log")); err != nil {
		return nil, err
	}
	s.bin = filepath.Join(s.dir, "bin")
	root, err := localstack.ModuleRoot(ctx, "run eskvchaos from the tools module (make chaos, or cd tools && go run ./eskvchaos)")
	if err != nil {
		return nil, err
	}
	s.logf("building devbroker, writer, projector into %s", s.bin)
	build := exec.CommandContext(ctx, "go", "build", "-o", s.bin+"/", "./cmd/devbroker", "./cmd/writer", "./cmd/projector")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %w\n%s", err, out)
	}

	if err := s.createDB(ctx); err != nil {
		return nil, err
	}
	if s.db, err = pgxpool.New(ctx, s.dbURL); err != nil {
		return nil, fmt.Errorf("connect %s: %w", s.dbURL, err)
	}
	if err := projection.Migrate(ctx, s.db); err != nil {
		return nil, err
	}
	s.store = projection.New(s.db)

	ports, err := localstack.FreePorts(1 + c.writers + c.projectors)
	if err != nil {
		return nil, err
	}
	s.brokers = fmt.Sprintf("127.0.0.1:%d", ports[0])
	s.token = "chaos-" + localstack.RandomHex(16)
	s.topics = changelog.Topics{Changes: changelog.DefaultChangesTopic, Conflicts: changelog.DefaultConflictsTopic, Partitions: int32(c.partitions)}
	common := []string{"ESKV_BROKERS=" + s.brokers, "ESKV_POSTGRES_URL=" + s.dbURL, "ESKV_LOG_LEVEL=" + c.logLevel,
		fmt.Sprintf("ESKV_PARTITIONS=%d", c.partitions)}

	s.broker = s.newProc("devbroker", "devbroker", "", fmt.Sprintf("ESKV_BROKER_PORT=%d", ports[0]),
		"ESKV_BROKER_DATA="+filepath.Join(s.dir, "broker"), "ESKV_BROKER_LOG_LEVEL=warn")
	for i := range c.projectors {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[1+c.writers+i])
		s.projectors = append(s.projectors, s.newProc(fmt.Sprintf("projector-%d", i+1), "projector", "http://"+addr,
			append(common, "ESKV_PROJECTOR_ADDR="+addr, fmt.Sprintf("ESKV_PROJECTOR_ID=chaos-p%d", i+1))...))
	}
	for i := range c.writers {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[1+i])
		s.writers = append(s.writers, s.newProc(fmt.Sprintf("writer-%d", i+1), "writer", "http://"+addr,
			append(common, "ESKV_HTTP_ADDR="+addr, "ESKV_DEV_TOKEN="+s.token, fmt.Sprintf("ESKV_WRITER_ID=chaos-w%d", i+1))...))
	}

	s.logf("starting devbroker on %s, %d projectors, %d writers (logs in %s)", s.brokers, c.projectors, c.writers, s.dir)
	if err := s.broker.start(); err != nil {
		return nil, err
	}
	if err := s.waitFor(ctx, 30*time.Second, "devbroker to listen on "+s.brokers, func() bool { return localstack.PortOpen(s.brokers) }); err != nil {
		return nil, err
	}
	if err := s.ensureTopics(ctx); err != nil {
		return nil, err
	}
	for _, p := range append(append([]*proc{}, s.projectors...), s.writers...) {
		if err := p.start(); err != nil {
			return nil, err
		}
	}
	if err := s.waitReady(ctx, 120*time.Second, true); err != nil {
		return nil, err
	}
	s.logf("stack ready: every partition owned by a ready writer")
	return s, nil
}

func (s *stack) newProc(name, bin, url string, env ...string) *proc {
	return &proc{s: s, name: name, bin: filepath.Join(s.bin, bin), env: env, url: url,
		log: filepath.Join(s.dir, name+".log"), state: stateDead}
}

// ensureTopics creates kv.changes and kv.conflicts before any service
// starts, so writers do not race to create them.
func (s *stack) ensureTopics(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return changelog.Ensure(ctx, kadm.NewClient(cl), s.topics)
}

func (s *stack) createDB(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return fmt.Errorf("postgres at %s is unreachable (set ESKV_TEST_POSTGRES_URL or -admin-postgres-url): %w", s.adminURL, err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	name := "eskvchaos_" + localstack.RandomHex(6)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	s.dbName = name
	s.dbURL, err = localstack.WithDatabase(s.adminURL, name)
	return err
}

// waitReady waits until every partition has an owner row naming a writer
// that is running and answers /readyz with 200, and every projector
// answers /readyz; with allWriters, every writer must be ready too (own
// partitions).
func (s *stack) waitReady(ctx context.Context, timeout time.Duration, allWriters bool) error {
	client := &http.Client{Timeout: 2 * time.Second}
	var why string
	err := s.waitFor(ctx, timeout, "every partition owned by a ready writer", func() bool {
		ready := map[string]bool{}
		for _, w := range s.writers {
			ready[w.url] = w.running() && localstack.HTTPOK(client, w.url+"/readyz")
			if allWriters && !ready[w.url] {
				why = w.name + " is not ready"
				return false
			}
		}
		for _, p := range s.projectors {
			if !p.running() || !localstack.HTTPOK(client, p.url+"/readyz") {
				why = p.name + " is not ready"
				return false
			}
		}
		owners, err := s.store.Owners(ctx)
		if err != nil {
			why = err.Error()
			return false
		}
		for id := range int32(s.topics.Partitions) {
			o, ok := owners[id]
			if !ok || !ready[o.Addr] {
				why = fmt.Sprintf("partition %d has no ready owner (%+v)", id, o)
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w (last: %s)", err, why)
	}
	return nil
}

// waitFor polls ok every 200 ms until it holds, ctx ends or timeout
// passes.
func (s *stack) waitFor(ctx context.Context, timeout time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// start starts the process (again).
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(f, "=== eskvchaos: start #%d at %.3fs ===\n", p.starts, time.Since(p.s.t0).Seconds())
	cmd := exec.Command(p.bin)
	cmd.Env = append(localstack.BaseEnv(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = p.s.dir
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.state, p.intended = cmd, done, stateRunning, false
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		unexpected := !p.intended && p.cmd == cmd
		if p.cmd == cmd {
			p.state = stateDead
		}
		p.mu.Unlock()
		close(done)
		if unexpected {
			p.s.unexpectedExit(p, err)
		}
	}()
	return nil
}

// unexpectedExit records a process that exited on its own and starts it
// again after a second, unless the stack is closing.
func (s *stack) unexpectedExit(p *proc, err error) {
	select {
	case <-s.closing:
		return
	default:
	}
	s.umu.Lock()
	s.exits = append(s.exits, fmt.Sprintf("%s exited on its own at %.1fs: %v", p.name, time.Since(s.t0).Seconds(), err))
	s.umu.Unlock()
	s.logf("%s exited on its own (%v); starting it again", p.name, err)
	s.sup.Add(1)
	go func() {
		defer s.sup.Done()
		select {
		case <-s.closing:
		case <-time.After(time.Second):
			if err := p.start(); err != nil {
				s.logf("restart %s: %v", p.name, err)
			}
		}
	}()
}

func (s *stack) unexpectedExits() []string {
	s.umu.Lock()
	defer s.umu.Unlock()
	return append([]string(nil), s.exits...)
}

// running reports whether the process runs and is not paused.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == stateRunning
}

func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill sends SIGKILL and waits for the process to exit.
func (p *proc) kill() {
	p.mu.Lock()
	if p.state == stateDead {
		p.mu.Unlock()
		return
	}
	p.intended = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	done := p.done
	p.mu.Unlock()
	<-done
}

// pause stops the process with SIGSTOP: it keeps its sockets and state
// but runs no code until resume.
func (p *proc) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != stateRunning {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err == nil {
		p.state = statePaused
	}
}

// resume continues a paused process with SIGCONT.
func (p *proc) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != statePaused {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err == nil {
		p.state = stateRunning
	}
}

// stop resumes the process if paused, sends SIGTERM and waits up to grace
// before SIGKILL.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	if p.state == stateDead {
		p.mu.Unlock()
		return
	}
	p.intended = true
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(grace):
		p.kill()
	}
}

// close stops writers, projectors and the broker, drops the database and
// removes the run directory unless keep.
func (s *stack) close(progress io.Writer, keep bool) {
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
	var wg sync.WaitGroup
	for _, p := range append(append([]*proc{}, s.writers...), s.projectors...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop(15 * time.Second)
		}()
	}
	wg.Wait()
	if s.broker != nil {
		s.broker.stop(15 * time.Second)
	}
	s.sup.Wait()
	if s.db != nil {
		s.db.Close()
	}
	if s.dbName != "" && !keep {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, s.adminURL); err != nil {
			fmt.Fprintf(progress, "eskvchaos: drop database %s: %v\n", s.dbName, err)
		} else {
			if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+s.dbName+" WITH (FORCE)"); err != nil {
				fmt.Fprintf(progress, "eskvchaos: drop database %s: %v\n", s.dbName, err)
			}
			c.Close(ctx)
		}
	}
	if s.dir == "" {
		return
	}
	s.pmu.Lock()
	if s.hlog != nil {
		s.hlog.Close()
		s.hlog = nil
	}
	s.pmu.Unlock()
	if keep {
		fmt.Fprintf(progress, "eskvchaos: kept logs, broker data and findings in %s and database %s\n", s.dir, s.dbName)
		return
	}
	os.RemoveAll(s.dir)
}

// printLogTails prints the end of every service log, without the WARN
// line each CAS conflict logs (expected by the hundred under contention).
func (s *stack) printLogTails(w io.Writer) {
	var procs []*proc
	if s.broker != nil {
		procs = append(procs, s.broker)
	}
	procs = append(append(procs, s.projectors...), s.writers...)
	for _, p := range procs {
		fmt.Fprintf(w, "--- %s log (tail of %s, conflicts left out) ---\n%s\n", p.name, p.log, tailWithout(p.log, 3000, `"msg":"version conflict"`))
	}
}

// tailWithout returns about the last n bytes of the file's lines that do
// not contain skip.
func tailWithout(path string, n int, skip string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.SplitAfter(string(b), "\n")
	var out []string
	size := 0
	for i := len(lines) - 1; i >= 0 && size < n; i-- {
		if lines[i] == "" || strings.Contains(lines[i], skip) {
			continue
		}
		out = append(out, lines[i])
		size += len(lines[i])
	}
	slices.Reverse(out)
	return strings.Join(out, "")
}
