package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/internal/localstack"
	"github.com/eskv/eskv/projection"
)

// benchLogLevel is the services' log level: at info the writer logs every
// write, which would cost more CPU than the write itself on a small box.
const benchLogLevel = "warn"

// stack is the system under test: started by the bench (own) or given by
// -url.
type stack struct {
	own          bool
	writerURL    string
	projectorURL string // "" when unknown
	auditorURL   string // "" when there is no auditor
	token        string
	db           *pgxpool.Pool // the projection, for visibility checks; nil when unknown
	writerPID    int
	projectorPID int
	auditorPID   int
	brokerPID    int

	// Set when the bench started the stack.
	dir       string
	extraDirs []string // removed with dir
	procs     []*proc  // in start order
	adminURL  string
	dbName    string
	auditor   *auditorSetup // nil without an auditor
}

// proc is one service process started by the bench.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// startStack builds the services, creates a database, starts broker,
// projector and writer on free ports and waits until they are ready. On
// error everything started is stopped again.
func startStack(ctx context.Context, c config, progress io.Writer) (_ *stack, err error) {
	s := &stack{own: true, adminURL: c.adminPostgresURL}
	defer func() {
		if err != nil {
			s.close(progress, c.keep)
		}
	}()
	if s.dir, err = os.MkdirTemp("", "eskvbench-"); err != nil {
		return nil, err
	}
	bin := filepath.Join(s.dir, "bin")

	root, err := localstack.ModuleRoot(ctx, "run eskvbench from the tools module (make bench, or cd tools && go run ./eskvbench), or target a running stack with -url")
	if err != nil {
		return nil, err
	}
	cmds := []string{"devbroker", "writer"}
	hasProjector := fileExists(filepath.Join(root, "cmd", "projector", "main.go"))
	if hasProjector {
		cmds = append(cmds, "projector")
	} else {
		fmt.Fprintln(progress, "eskvbench: cmd/projector does not exist yet: running without it (list, lag and visibility are skipped)")
	}
	hasAuditor := false
	switch {
	case !c.auditor:
	case !fileExists(filepath.Join(root, "cmd", "auditor", "main.go")):
		fmt.Fprintln(progress, "eskvbench: cmd/auditor does not exist: auditor figures are skipped")
	default:
		if err := clickHouseReachable(ctx, c.clickhouseAddr); err != nil {
			fmt.Fprintf(progress, "eskvbench: ClickHouse at %s is unreachable (bash scripts/ensure-clickhouse.sh starts it): auditor figures are skipped: %v\n", c.clickhouseAddr, err)
		} else {
			hasAuditor = true
			cmds = append(cmds, "auditor")
		}
	}
	fmt.Fprintf(progress, "eskvbench: building %s\n", strings.Join(cmds, ", "))
	args := []string{"build", "-o", bin + "/"}
	for _, name := range cmds {
		args = append(args, "./cmd/"+name)
	}
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %w\n%s", err, out)
	}

	dbURL, err := s.createDB(ctx)
	if err != nil {
		return nil, err
	}
	if s.db, err = pgxpool.New(ctx, dbURL); err != nil {
		return nil, fmt.Errorf("connect %s: %w", dbURL, err)
	}
	// Migrate here, so writer and projector do not race to do it.
	if err := projection.Migrate(ctx, s.db); err != nil {
		return nil, err
	}

	brokerData := filepath.Join(s.dir, "broker")
	if c.brokerDataParent != "" {
		if brokerData, err = os.MkdirTemp(c.brokerDataParent, "eskvbench-broker-"); err != nil {
			return nil, err
		}
		s.extraDirs = append(s.extraDirs, brokerData)
	}
	// The broker needs its port up front (clients dial it); writer and
	// projector bind :0 and report their address in a file.
	ports, err := localstack.FreePorts(1)
	if err != nil {
		return nil, err
	}
	s.token = "bench-" + localstack.RandomHex(16)
	brokers := fmt.Sprintf("127.0.0.1:%d", ports[0])
	common := []string{"ESKV_BROKERS=" + brokers, "ESKV_POSTGRES_URL=" + dbURL, "ESKV_LOG_LEVEL=" + benchLogLevel,
		fmt.Sprintf("ESKV_PARTITIONS=%d", c.partitions)}

	fmt.Fprintf(progress, "eskvbench: starting %s in %s\n", strings.Join(cmds, ", "), s.dir)
	started := time.Now()
	broker, err := s.start(bin, "devbroker", fmt.Sprintf("ESKV_BROKER_PORT=%d", ports[0]),
		"ESKV_BROKER_DATA="+brokerData, "ESKV_BROKER_LOG_LEVEL="+benchLogLevel)
	if err != nil {
		return nil, err
	}
	s.brokerPID = broker.cmd.Process.Pid
	if err := waitFor(ctx, 20*time.Second, broker, func() bool { return localstack.PortOpen(brokers) }); err != nil {
		return nil, s.startupError("devbroker did not listen on "+brokers, err)
	}

	var proj *proc
	projAddrFile := filepath.Join(s.dir, "projector.addr")
	if hasProjector {
		if proj, err = s.start(bin, "projector", append(common,
			"ESKV_PROJECTOR_ADDR=127.0.0.1:0", "ESKV_PROJECTOR_ADDR_FILE="+projAddrFile)...); err != nil {
			return nil, err
		}
		s.projectorPID = proj.cmd.Process.Pid
	}
	writerAddrFile := filepath.Join(s.dir, "writer.addr")
	w, err := s.start(bin, "writer", append(common,
		"ESKV_HTTP_ADDR=127.0.0.1:0", "ESKV_ADDR_FILE="+writerAddrFile,
		"ESKV_DEV_TOKEN="+s.token,
		"ESKV_WRITER_ID=eskvbench-writer")...)
	if err != nil {
		return nil, err
	}
	s.writerPID = w.cmd.Process.Pid

	if proj != nil {
		addr, err := waitAddr(ctx, proj, projAddrFile)
		if err != nil {
			return nil, s.startupError("projector did not report its address", err)
		}
		s.projectorURL = "http://" + addr
	}
	addr, err := waitAddr(ctx, w, writerAddrFile)
	if err != nil {
		return nil, s.startupError("writer did not report its address", err)
	}
	s.writerURL = "http://" + addr

	client := &http.Client{Timeout: 2 * time.Second}
	if err := waitFor(ctx, 90*time.Second, w, func() bool { return localstack.HTTPOK(client, s.writerURL+"/readyz") }); err != nil {
		return nil, s.startupError(s.writerURL+"/readyz did not answer 200", err)
	}
	if proj != nil {
		if err := waitFor(ctx, 30*time.Second, proj, func() bool {
			return localstack.HTTPOK(client, s.projectorURL+"/readyz") || localstack.HTTPOK(client, s.projectorURL+"/metrics")
		}); err != nil {
			return nil, s.startupError("projector at "+s.projectorURL+" did not answer", err)
		}
	}
	if hasAuditor {
		s.auditor = &auditorSetup{
			bin: filepath.Join(bin, "auditor"), chAddr: c.clickhouseAddr, brokers: brokers,
			env: []string{"ESKV_BROKERS=" + brokers, fmt.Sprintf("ESKV_PARTITIONS=%d", c.partitions), "ESKV_LOG_LEVEL=" + benchLogLevel,
				"ESKV_CLICKHOUSE_ADDR=" + c.clickhouseAddr, "ESKV_AUDIT_KEY=" + localstack.RandomHex(32), "ESKV_AUDIT_KEY_ID=eskvbench"},
		}
		p, url, err := s.startAuditor(ctx, "auditor", "kv-auditor")
		if err != nil {
			return nil, err
		}
		if err := auditorReady(ctx, p, url); err != nil {
			return nil, s.startupError("auditor at "+url+" did not get ready", err)
		}
		s.auditorURL, s.auditorPID = url, p.cmd.Process.Pid
	}
	fmt.Fprintf(progress, "eskvbench: stack ready in %s\n", time.Since(started).Round(time.Millisecond))
	return s, nil
}

func (s *stack) createDB(ctx context.Context) (string, error) {
	admin, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return "", fmt.Errorf("postgres at %s is unreachable (set ESKV_TEST_POSTGRES_URL or -admin-postgres-url): %w", s.adminURL, err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	name := "eskvbench_" + localstack.RandomHex(6)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	s.dbName = name
	return localstack.WithDatabase(s.adminURL, name)
}

func (s *stack) start(bin, name string, env ...string) (*proc, error) {
	return s.startArgs(filepath.Join(bin, name), name, nil, env...)
}

// startArgs starts the binary at path with args as the service name.
func (s *stack) startArgs(path, name string, args []string, env ...string) (*proc, error) {
	logPath := filepath.Join(s.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(path, args...)
	cmd.Env = append(localstack.BaseEnv("ESKV_PPROF_ADDR"), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = s.dir
	// Its own process group, so a Ctrl-C reaches only the bench, which
	// then stops the services in order.
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.procs = append(s.procs, p)
	return p, nil
}

// startupError wraps err with the tails of the service logs.
func (s *stack) startupError(what string, err error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %v", what, err)
	for _, p := range s.procs {
		fmt.Fprintf(&b, "\n--- %s log (tail) ---\n%s", p.name, tail(p.log, 3000))
	}
	return errors.New(b.String())
}

// close stops writer, projector and broker (in that order: the writer
// leaves the group, the projector commits, the broker goes last), drops the
// database and removes the temporary directory unless keep.
func (s *stack) close(progress io.Writer, keep bool) {
	for i := len(s.procs) - 1; i >= 0; i-- {
		stopProc(s.procs[i], 15*time.Second)
	}
	if s.db != nil {
		s.db.Close()
	}
	if !s.own {
		return
	}
	if !keep {
		s.auditor.dropDatabases(progress)
	}
	if s.dbName != "" && !keep {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, s.adminURL); err != nil {
			fmt.Fprintf(progress, "eskvbench: drop database %s: %v\n", s.dbName, err)
		} else {
			if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+s.dbName+" WITH (FORCE)"); err != nil {
				fmt.Fprintf(progress, "eskvbench: drop database %s: %v\n", s.dbName, err)
			}
			c.Close(ctx)
		}
	}
	if s.dir == "" {
		return
	}
	if keep {
		fmt.Fprintf(progress, "eskvbench: kept logs and broker data in %s %s and database %s\n", s.dir, strings.Join(s.extraDirs, " "), s.dbName)
		return
	}
	for _, d := range s.extraDirs {
		os.RemoveAll(d)
	}
	os.RemoveAll(s.dir)
}

func stopProc(p *proc, grace time.Duration) {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitFor polls ok every 100 ms until it holds, p exits, ctx ends or the
// timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, p *proc, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if ok() {
			return nil
		}
		if !p.alive() {
			return fmt.Errorf("%s exited: %v", p.name, p.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitAddr waits for the address a service writes to path once it
// listens.
func waitAddr(ctx context.Context, p *proc, path string) (string, error) {
	var addr string
	err := waitFor(ctx, 60*time.Second, p, func() bool {
		b, err := os.ReadFile(path)
		addr = strings.TrimSpace(string(b))
		if err != nil || addr == "" {
			return false
		}
		_, port, err := net.SplitHostPort(addr)
		return err == nil && port != "" && port != "0"
	})
	return addr, err
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// logSummary counts a service log's lines by level and keeps the most
// frequent WARN and ERROR messages.
type logSummary struct {
	Service  string         `json:"service"`
	Warn     int            `json:"warn"`
	Error    int            `json:"error"`
	Other    int            `json:"other"` // lines that are not JSON (panics, stray prints)
	Messages map[string]int `json:"messages,omitempty"`
	Samples  []string       `json:"samples,omitempty"`
}

func summarizeLog(service, path string) logSummary {
	ls := logSummary{Service: service, Messages: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		return ls
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var rec struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			ls.Other++
			if len(ls.Samples) < 5 {
				ls.Samples = append(ls.Samples, truncate(string(line), 300))
			}
			continue
		}
		switch rec.Level {
		case "WARN":
			ls.Warn++
		case "ERROR":
			ls.Error++
		default:
			continue
		}
		k := rec.Level + " " + rec.Msg
		if ls.Messages[k] == 0 && len(ls.Samples) < 5 {
			ls.Samples = append(ls.Samples, truncate(string(line), 300))
		}
		ls.Messages[k]++
	}
	return ls
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
