package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eskv/eskv/changelog"
)

// Figure 18 runs one workload on eskv and on the systems a user would
// compare it with, in the same run on the same machine: each client
// reads its key and compare-and-swaps it with the revision it read, in a
// closed loop. eskv answers through its HTTP API (the bench's own stack);
// the peers are a plain Postgres table, etcd, NATS JetStream KV and
// Redis, each started by the bench on free ports and stopped afterwards
// (peers_*.go).

// casTarget is one system under figure 18's load: eskv or a peer. The
// load loop (driveCAS) is the same for all of them.
type casTarget interface {
	// setup creates keys, each with a first value.
	setup(ctx context.Context, keys []string) error
	// read returns key's value and its revision (version, ModRevision,
	// stream sequence).
	read(ctx context.Context, key string) (val []byte, rev int64, err error)
	// cas writes val if key's revision is still rev; false when it is not
	// (a conflict, which is no error).
	cas(ctx context.Context, key string, val []byte, rev int64) (ok bool, err error)
	// close disconnects and stops what the target started.
	close()
}

// Shape of figure 18's workload (the table).
const (
	peerProjectCount = 8  // projects the distinct keys are spread over
	sharedClients    = 16 // clients of the shared-keys run
	sharedKeys       = 4  // keys they share
)

// casScenario is one run of the workload.
type casScenario struct {
	step    string
	title   string
	clients int
	keys    int // client i writes key i % keys
}

func (b *bench) casScenarios() []casScenario {
	n := b.c.peerClients
	return []casScenario{
		{"18a", fmt.Sprintf("%d clients, %d distinct keys in %d projects", n, n, peerProjectCount), n, n},
		{"18b", "1 client, 1 key", 1, 1},
		{"18c", fmt.Sprintf("%d clients on %d shared keys", sharedClients, sharedKeys), sharedClients, sharedKeys},
	}
}

// casOutcome is what one system did in one scenario.
type casOutcome struct {
	OK              int            `json:"ok"`
	Conflicts       int            `json:"conflicts"`
	Errors          int            `json:"errors"`
	ErrorsBy        map[string]int `json:"errorsBy,omitempty"`
	Seconds         float64        `json:"seconds"`
	OKPerSec        float64        `json:"okPerSec"`
	ConflictsPerSec float64        `json:"conflictsPerSec"`
	P50             ms             `json:"casP50Ms"` // of the CAS alone
	P99             ms             `json:"casP99Ms"`
	CycleP50        ms             `json:"readCasP50Ms"` // read + CAS
	// Machine is the machine probe's medians over the run (probe.go).
	Machine machineSpeed `json:"machineProbe"`
}

// peerRow is one line of figure 18.
type peerRow struct {
	Step        string `json:"step"`
	Scenario    string `json:"scenario"`
	System      string `json:"system"`
	Version     string `json:"version,omitempty"`
	Unavailable string `json:"unavailable,omitempty"`
	casOutcome
	// Again marks eskv's second run of the scenario, after the peers.
	Again bool `json:"again,omitempty"`
	// Ratio is eskv's ok/s (the mean of its runs) over this system's in
	// the same scenario.
	Ratio float64    `json:"eskvRatio,omitempty"`
	CPU   *cpuReport `json:"cpu,omitempty"` // over the first scenario
}

// peerFigure is figure 18.
type peerFigure struct {
	Rows []peerRow `json:"rows"`
	Note string    `json:"note,omitempty"`
	// Statements are eskv's Postgres statements over 18a's first run.
	Statements []pgStatement `json:"eskvStatements,omitempty"`
}

// peerNote explains figure 18's columns.
const peerNote = "ok/s: acknowledged compare-and-swaps per second; p50/p99 of the CAS alone, read+CAS p50 of the whole cycle; " +
	"eskv ÷: eskv's ok/s (the mean of its runs: with peers, 18a runs again after them) over the system's in the same scenario; " +
	"CPU µs/write: the system's processes (utime+stime from /proc) " +
	"over the first scenario ÷ its acknowledged writes, the load generator not counted"

// system is a started system of figure 18.
type system struct {
	name     string
	version  string
	target   casTarget
	classify classifier // its processes, for its CPU per write
	again    bool       // eskv's second run, after the peers
}

// peers is figure 18: eskv first, then each peer, started, measured and
// stopped in turn, so that only one system is loaded at a time (eskv's
// stack stays up, idle, while the peers run), then eskv's first scenario
// once more: this VM's speed changes between minutes (the Postgres
// peer's CPU per CAS moved 1.5–2× within an afternoon), and eskv's two
// runs of it, minutes apart, show how much the slots of this run moved.
func (b *bench) peers(ctx context.Context, rep *report) error {
	fig := &peerFigure{Note: peerNote}
	rep.Peers = fig
	projects := b.peerProjects()
	b.logf("18 read-then-CAS on eskv and %s, %s per run", strings.Join(b.c.peers, ", "), b.c.peerDuration)
	eskv := system{name: "eskv", version: "this tree", target: &eskvTarget{b: b}, classify: b.eskvClassifier()}
	if err := b.measureSystem(ctx, fig, eskv, projects); err != nil {
		return err
	}
	for _, name := range b.c.peers {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.logf("18 starting %s", name)
		sys, err := startPeer(ctx, name, b.peerConfig())
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.logf("18 %s unavailable: %v", name, err)
			fig.Rows = append(fig.Rows, peerRow{Step: "18", Scenario: "-", System: name, Unavailable: firstLine(err.Error())})
			continue
		}
		err = b.measureSystem(ctx, fig, sys, projects)
		sys.target.close()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			// A peer that fails under load is reported, not fatal: the
			// figure is about eskv, the peers are its yardstick.
			b.logf("18 %s failed: %v", name, err)
			fig.Rows = append(fig.Rows, peerRow{Step: "18", Scenario: "-", System: name, Version: sys.version,
				Unavailable: "failed: " + firstLine(err.Error())})
		}
	}
	if len(b.c.peers) == 0 || ctx.Err() != nil {
		return ctx.Err()
	}
	eskv.version, eskv.again = "this tree, again", true
	return b.measureScenario(ctx, fig, eskv, projects, b.casScenarios()[0], true)
}

// measureSystem runs every scenario on sys and adds a row for each; the
// CPU of sys's processes is read around the first.
func (b *bench) measureSystem(ctx context.Context, fig *peerFigure, sys system, projects []string) error {
	for i, sc := range b.casScenarios() {
		if err := b.measureScenario(ctx, fig, sys, projects, sc, i == 0); err != nil {
			return err
		}
	}
	return nil
}

// measureScenario runs sc on sys and adds its row, with the CPU of sys's
// processes when withCPU (the first scenario of a system, after an
// unmeasured run of -peer-warmup). eskv's run again (sys.again) writes
// keys of its own.
func (b *bench) measureScenario(ctx context.Context, fig *peerFigure, sys system, projects []string, sc casScenario, withCPU bool) error {
	name := "cas" + sc.step
	if sys.again {
		name += "again"
	}
	keys := make([]string, sc.keys)
	for k := range keys {
		keys[k] = b.key(projects[k%len(projects)], fmt.Sprintf("%s-%s-k%03d", name, b.runID, k))
	}
	b.logf("18 %s (%s): %s, %s", sys.name, sys.version, sc.title, b.c.peerDuration)
	if err := sys.target.setup(ctx, keys); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("figure 18, %s: creating %d keys: %w", sys.name, len(keys), err)
	}
	if withCPU {
		b.settle(ctx, sys.name)
	}
	if withCPU && b.c.peerWarmup > 0 {
		// Unmeasured: caches, pools, plans and heaps settle first, in
		// every system alike.
		b.logf("18 %s: warming up for %s", sys.name, b.c.peerWarmup)
		driveCAS(ctx, sys.target, keys, sc.clients, b.c.peerWarmup)
	}
	var before cpuSample
	if withCPU && sys.classify != nil {
		before = sampleCPU("/proc", sys.classify)
	}
	statements := withCPU && sys.name == "eskv" && !sys.again && resetStatements(ctx, b.s.db)
	out := driveCAS(ctx, sys.target, keys, sc.clients, b.c.peerDuration)
	if statements {
		var err error
		if fig.Statements, err = readStatements(ctx, b.s.db, out.OK); err != nil {
			b.logf("18 pg_stat_statements: %v", err)
		}
	}
	row := peerRow{Step: sc.step, Scenario: sc.title, System: sys.name, Version: sys.version, Again: sys.again, casOutcome: out}
	if before != nil {
		row.CPU = newCPUReport(sampleCPU("/proc", sys.classify).since(before, sys.classify), out.OK, out.Seconds)
	}
	fig.Rows = append(fig.Rows, row)
	return ctx.Err()
}

// ratios sets each row's eskv ÷ system ratio, eskv's ok/s being the mean
// of its runs of the scenario (18a runs twice: before and after the
// peers), so an eskv row's own ratio is that mean over its run.
func (f *peerFigure) ratios() {
	sum, runs := map[string]float64{}, map[string]int{}
	for _, r := range f.Rows {
		if r.System == "eskv" && r.Unavailable == "" {
			sum[r.Step] += r.OKPerSec
			runs[r.Step]++
		}
	}
	for i := range f.Rows {
		if r := &f.Rows[i]; r.OKPerSec > 0 && sum[r.Step] > 0 {
			r.Ratio = sum[r.Step] / float64(runs[r.Step]) / r.OKPerSec
		}
	}
}

// peerProjects picks peerProjectCount projects on distinct partitions
// (when there are enough), so eskv's writes spread over its partitions
// as a multi-project load would.
func (b *bench) peerProjects() []string {
	seen := map[int32]bool{}
	var projects []string
	for i := 0; len(projects) < peerProjectCount; i++ {
		p := fmt.Sprintf("peers-%s-%d", b.runID, i)
		part := changelog.Partition("tenant/"+tenant+"/project/"+p, int32(b.c.partitions))
		if !seen[part] || len(seen) >= b.c.partitions || i > 1000 {
			seen[part] = true
			projects = append(projects, p)
		}
	}
	return projects
}

// statusError is a failed call's HTTP status (eskv); the peers' errors
// count as transport errors (status 0).
type statusError int

func (e statusError) Error() string {
	return fmt.Sprintf("HTTP %d %s", int(e), http.StatusText(int(e)))
}

// statusOfErr is the status loops counts err under.
func statusOfErr(err error) int {
	if se, ok := errors.AsType[statusError](err); ok {
		return int(se)
	}
	return 0
}

// driveCAS runs clients closed loops of read-then-CAS on keys (client i
// on keys[i % len]) for d and sums them up. A conflict is counted apart
// (the loop goes on with a fresh read), an error by its status.
func driveCAS(ctx context.Context, t casTarget, keys []string, clients int, d time.Duration) casOutcome {
	calls := make([]func() (int, error), clients)
	casLat := make([]latencies, clients)
	for i := range calls {
		key, seq := keys[i%len(keys)], 0
		prefix := `{"client":` + strconv.Itoa(i) + `,"seq":`
		var val []byte
		calls[i] = func() (int, error) {
			_, rev, err := t.read(ctx, key)
			if err != nil {
				return statusOfErr(err), err
			}
			seq++
			val = append(strconv.AppendInt(append(val[:0], prefix...), int64(seq), 10), '}')
			t0 := time.Now()
			ok, err := t.cas(ctx, key, val, rev)
			switch {
			case err != nil:
				return statusOfErr(err), err
			case !ok:
				return http.StatusConflict, nil
			}
			casLat[i] = append(casLat[i], time.Since(t0))
			return http.StatusOK, nil
		}
	}
	probe := startProbe()
	cycles, errs, elapsed := loops(ctx, time.Now().Add(d), calls)
	machine := probe.finish()
	conflicts := errs[http.StatusConflict]
	delete(errs, http.StatusConflict)
	cyc, cas := summarize(cycles...), summarize(casLat...)
	r := newResult("", "", cas, errs, elapsed)
	out := casOutcome{OK: cas.N, Conflicts: conflicts, Errors: r.Errors, ErrorsBy: r.ErrorsBy, Seconds: elapsed.Seconds(),
		OKPerSec: r.OpsPerSec, P50: ms(cas.P50), P99: ms(cas.P99), CycleP50: ms(cyc.P50), Machine: machine}
	if elapsed > 0 {
		out.ConflictsPerSec = float64(conflicts) / elapsed.Seconds()
	}
	return out
}

// eskvClassifier counts the processes of the bench's own stack: its
// services, the backends of its database with Postgres's shared
// background processes, and ClickHouse (the auditor's). Without an own
// stack there are no pids to count (nil).
func (b *bench) eskvClassifier() classifier {
	if !b.s.own || b.s.local == nil {
		return nil
	}
	names := map[int]string{}
	for _, p := range b.s.local.Procs() {
		names[p.PID()] = p.Name
	}
	if b.s.auditorPID != 0 {
		names[b.s.auditorPID] = "auditor"
	}
	db, self := b.s.local.DBName, os.Getpid()
	return func(p procInfo) string {
		if n, ok := names[p.PID]; ok {
			return n
		}
		if p.PID == self {
			return kindLoadGenerator
		}
		if k := postgresKind(p, db); k != "" {
			return k
		}
		return clickhouseKind(p)
	}
}

// printPeers prints figure 18: the side-by-side table, then eskv's CPU.
func (r *report) printPeers(w io.Writer) error {
	f := r.Peers
	if f == nil {
		return nil
	}
	f.ratios() // here, so that an interrupted run has them too
	fmt.Fprintln(w)
	fmt.Fprintln(w, "18  read-then-CAS, each system in this run on the same workload")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tscenario\tsystem\tversion\tok/s\tconflicts/s\tCAS p50\tCAS p99\tread+CAS p50\terrors\teskv ÷\tCPU µs/write")
	for _, row := range f.Rows {
		if row.Unavailable != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\tunavailable: %s\t\t\t\t\t\t\t\t\n", row.Step, row.Scenario, row.System, row.Unavailable)
			continue
		}
		ratio, cpu := "-", "-"
		if row.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f×", row.Ratio)
		}
		if row.CPU != nil && row.CPU.MicrosPerWrite > 0 {
			cpu = fmt.Sprintf("%.0f", row.CPU.MicrosPerWrite)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t%d\t%s\t%s\n", row.Step, row.Scenario, row.System, row.Version,
			row.OKPerSec, row.ConflictsPerSec, fmtDuration(time.Duration(row.P50)), fmtDuration(time.Duration(row.P99)),
			fmtDuration(time.Duration(row.CycleP50)), row.Errors, ratio, cpu)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if f.Note != "" {
		fmt.Fprintf(w, "18: %s\n", f.Note)
	}
	if first, again := f.eskvRuns(); again != nil && first.OKPerSec > 0 {
		fmt.Fprintf(w, "18: eskv's %s before and after the peers: %.0f and %.0f ok/s (after ÷ before %.2f",
			first.Step, first.OKPerSec, again.OKPerSec, again.OKPerSec/first.OKPerSec)
		if probe := again.Machine.ratio(first.Machine); probe != "-" {
			fmt.Fprintf(w, "; the machine probe's time after ÷ before %s", probe)
		}
		fmt.Fprint(w, ")")
		if first.CPU != nil && again.CPU != nil && first.OK+again.OK > 0 {
			fmt.Fprintf(w, "; over both, %.0f µs CPU per acknowledged write",
				(first.CPU.TotalSeconds+again.CPU.TotalSeconds)/float64(first.OK+again.OK)*1e6)
		}
		fmt.Fprintln(w)
	}
	for _, row := range f.Rows {
		if row.System == "eskv" && row.CPU != nil {
			again := ""
			if row.Again {
				again = ", again after the peers"
			}
			fmt.Fprintf(w, "18: eskv's CPU over %s (%s%s):\n", row.Step, row.Scenario, again)
			row.CPU.print(w, "    ")
		}
		if len(row.ErrorsBy) > 0 {
			fmt.Fprintf(w, "18: %s %s errors: %v\n", row.System, row.Step, row.ErrorsBy)
		}
	}
	if err := printStatements(w, f.Statements); err != nil {
		return err
	}
	f.printTargets(w)
	return nil
}

// eskvRuns returns eskv's first row and its run again after the peers
// (nil when there was none).
func (f *peerFigure) eskvRuns() (first, again *peerRow) {
	for i := range f.Rows {
		r := &f.Rows[i]
		if r.System == "eskv" && r.Again {
			again = r
		}
		if r.System == "eskv" && first == nil {
			first = r
		}
	}
	return first, again
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// settleBusy is the share of the machine's CPU below which it counts as
// quiet before a system's measured runs (settle): a tenth of it, what an
// idle stack, the idle peers and the shell cost here.
const settleBusy = 0.10

// settle waits, before a system's measured runs, until the machine is
// quiet (busy under settleBusy over half a second), for -peer-settle at
// most: each system then starts on a machine doing nothing else — not
// the previous figures' backlog (figure 18 runs last in a full `make
// bench`: the projector, the auditor and ClickHouse's merges may still be
// at work), not another process. Measured on a busy machine, a system's
// run would pay for the other work in ok/s, and eskv's in CPU per write
// too (its Postgres and ClickHouse are shared).
func (b *bench) settle(ctx context.Context, name string) {
	if b.c.peerSettle <= 0 {
		return
	}
	start := time.Now()
	prev, ok := readMachineCPU("/proc")
	if !ok {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		cur, _ := readMachineCPU("/proc")
		busy := cur.busyShare(prev)
		switch waited := time.Since(start); {
		case busy < settleBusy:
			b.logf("18 %s: machine quiet (%.0f%% busy) after %s", name, 100*busy, waited.Round(100*time.Millisecond))
			return
		case waited >= b.c.peerSettle:
			b.logf("18 %s: machine still %.0f%% busy after %s; measuring anyway", name, 100*busy, waited.Round(100*time.Millisecond))
			return
		}
		prev = cur
	}
}
