package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/tools/internal/localstack"
)

// benchLogLevel is the services' log level: info, make run's default, so
// the writer logs every write as the seeds require and the figures include
// it (issue 16 measures with INFO logs on). What the line costs, figure
// 18a alternating warn and info, 2026-11-24 09:59-10:02 UTC: the writer
// 109-113 µs of CPU per write at warn, 119-129 at info; the stack 240-262
// µs per write at warn, 262-282 at info (docs/performance.md).
// benchBrokerLogLevel is devbroker's, its default (at info kfake logs
// every request).
const (
	benchLogLevel       = "info"
	benchBrokerLogLevel = "warn"
)

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

	local   *localstack.Stack // set when the bench started the stack
	auditor *auditorSetup     // nil without an auditor
	// final is figure 6 of the services stopped before the end
	// (stopServices), by PID.
	final map[int]procReport
}

// stopServices stops the stack's services (together, as at the end: the
// writers leave their group, the projector commits) and keeps what figure
// 6 reads of the writer, projector and auditor for the report. The broker
// keeps running.
func (s *stack) stopServices() {
	s.final = map[int]procReport{}
	for _, p := range processes(s) {
		if p.PID == s.writerPID || p.PID == s.projectorPID || p.PID == s.auditorPID {
			p.Note = strings.TrimPrefix(p.Note+"; stopped before the end", "; ")
			s.final[p.PID] = p
		}
	}
	proc.StopAll(15*time.Second, s.local.Services...)
}

// startStack builds the services, creates a database, starts broker,
// projector, writer and (when ClickHouse answers) the auditor on free
// ports and waits until they are ready. On error everything started is
// stopped again.
func startStack(ctx context.Context, c config, progress io.Writer) (_ *stack, err error) {
	cmds := []string{"writer", "projector"}
	withAuditor := c.auditor && auditorAvailable(ctx, c.clickhouseAddr, progress)
	if withAuditor {
		cmds = append(cmds, "auditor")
	}
	ls, err := localstack.New(ctx, localstack.Config{Tool: "eskvbench", AdminURL: c.adminPostgresURL, Cmds: cmds, Progress: progress,
		BrokerData: c.brokerDataParent, BrokerLogLevel: benchBrokerLogLevel, PprofBase: os.Getenv("ESKV_PPROF_ADDR")})
	if err != nil {
		return nil, err
	}
	s := &stack{own: true, local: ls, db: ls.DB, token: "bench-" + localstack.RandomHex(16)}
	defer func() {
		if err != nil {
			s.close(progress, c.keep)
		}
	}()
	started := time.Now()
	fmt.Fprintf(progress, "eskvbench: starting devbroker, %s in %s\n", strings.Join(cmds, ", "), ls.Dir)
	if err := ls.StartBroker(ctx); err != nil {
		return nil, ls.StartupError(err)
	}
	env := ls.Env(benchLogLevel, c.partitions)
	proj, err := s.startListening("projector", nil, "ESKV_PROJECTOR_ADDR", "ESKV_PROJECTOR_ADDR_FILE", env...)
	if err != nil {
		return nil, err
	}
	// The bench is one principal (the dev token): figure 17's idle
	// watchers may take every watch, not a principal's tenth.
	w, err := s.startListening("writer", nil, "ESKV_HTTP_ADDR", "ESKV_ADDR_FILE",
		append(env, "ESKV_DEV_TOKEN="+s.token, "ESKV_WRITER_ID=eskvbench-writer", "ESKV_HTTP_READ_TIMEOUT="+c.robustRead.String(),
			"ESKV_HTTP_WRITE_TIMEOUT="+c.robustWrite.String(), "ESKV_HTTP_IDLE_TIMEOUT="+c.robustIdle.String(),
			"ESKV_MAX_WATCHES_PER_PRINCIPAL=1000")...)
	if err != nil {
		return nil, err
	}
	if s.projectorURL, err = s.waitListening(ctx, proj); err != nil {
		return nil, err
	}
	if s.writerURL, err = s.waitListening(ctx, w); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx, 90*time.Second, w, "/readyz"); err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx, 30*time.Second, proj, "/readyz", "/metrics"); err != nil {
		return nil, err
	}
	if withAuditor {
		if err := s.startFirstAuditor(ctx, c); err != nil {
			return nil, err
		}
	}
	s.brokerPID, s.writerPID, s.projectorPID = ls.Broker.PID(), w.PID(), proj.PID()
	fmt.Fprintf(progress, "eskvbench: stack ready in %s\n", time.Since(started).Round(time.Millisecond))
	return s, nil
}

// startListening starts the service name on a port of its choosing, which
// it writes to a file (the service's addrVar and fileVar settings).
func (s *stack) startListening(name string, args []string, addrVar, fileVar string, env ...string) (*proc.Proc, error) {
	file := filepath.Join(s.local.Dir, name+".addr")
	bin, _, _ := strings.Cut(name, "-")
	p := s.local.Service(name, bin, args, append(env, addrVar+"=127.0.0.1:0", fileVar+"="+file)...)
	return p, p.Start()
}

// waitListening waits for the address p reports and returns its base URL.
func (s *stack) waitListening(ctx context.Context, p *proc.Proc) (string, error) {
	addr, err := proc.WaitAddrFile(ctx, 60*time.Second, p, filepath.Join(s.local.Dir, p.Name+".addr"))
	if err != nil {
		return "", s.local.StartupError(err)
	}
	p.URL = "http://" + addr
	return p.URL, nil
}

// waitReady waits until one of p's paths answers 200.
func (s *stack) waitReady(ctx context.Context, timeout time.Duration, p *proc.Proc, paths ...string) error {
	err := proc.WaitFor(ctx, timeout, p.Name+" at "+p.URL+" to answer "+strings.Join(paths, " or "), p, func() bool {
		return slices.ContainsFunc(paths, func(path string) bool { return proc.HTTPOK(p.URL + path) })
	})
	if err != nil {
		return s.local.StartupError(err)
	}
	return nil
}

// stop stops the processes the bench started.
func (s *stack) stop() {
	if s.local != nil {
		s.local.Stop()
	}
}

// close stops the processes, drops the databases and removes the
// temporary directory unless keep.
func (s *stack) close(progress io.Writer, keep bool) {
	if s.local == nil {
		if s.db != nil {
			s.db.Close()
		}
		return
	}
	s.local.Close(keep)
	if !keep {
		s.auditor.dropDatabases(progress)
	}
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

// tailOf is the last n bytes of s, after "…" when it cut some (an
// error's message ends a log).
func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
