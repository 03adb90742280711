package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eskv/eskv/tools/internal/stats"
)

// Figure 22 runs figure 18a's workload (read-then-CAS, -peer-clients
// clients on distinct keys over 8 projects) on eskv alone for -sustain, in
// windows of -sustain-window, and prints each window: whether eskv keeps
// its speed as its tables and logs grow. Its target: the last window's
// ok/s at least targetSustainRatio of the first's. Each window also shows
// what might explain a decay: the CPU per write, the writer's resident
// memory, the projection's tables (their size on disk and kv_entries'
// dead rows, which autovacuum removes on a cluster configured as
// production runs one: -postgres own; kv_history's, an insert-only table
// autovacuum also scans as it grows), and the cluster's WAL per write
// and checkpoints so far (after a checkpoint, the first change of each
// page writes the whole page to the WAL again).
const targetSustainRatio = 0.9

// sustainWindow is one window of figure 22.
type sustainWindow struct {
	casOutcome
	CPUMicrosPerWrite float64 `json:"cpuMicrosPerWrite,omitempty"`
	WriterRSS         int64   `json:"writerRssBytes,omitempty"`
	EntriesBytes      int64   `json:"kvEntriesBytes,omitempty"`
	HistoryBytes      int64   `json:"kvHistoryBytes,omitempty"`
	DeadEntries       int64   `json:"kvEntriesDeadRows"`
	Vacuums           int64   `json:"kvEntriesAutovacuums"`
	// WALPerWrite is the cluster's WAL bytes over the window ÷ its
	// acknowledged writes; Checkpoints the cluster's checkpoints since
	// its statistics were reset, at the window's end.
	WALPerWrite float64 `json:"walBytesPerWrite,omitempty"`
	Checkpoints int64   `json:"checkpoints"`
	// HistoryVacuums are kv_history's autovacuum runs so far (an
	// insert-only table is vacuumed as it grows, whole).
	HistoryVacuums int64 `json:"kvHistoryAutovacuums"`
	// TopCPU is the three processes (kinds) with the most CPU per write
	// ("writer 98, postgres 85, devbroker 40"): which one a slower
	// window's extra CPU went to. Steal is the share of the machine's
	// time its VM's host took for something else: a slow window with
	// steal is the host's doing.
	TopCPU string  `json:"topCpuMicrosPerWrite,omitempty"`
	Steal  float64 `json:"stealShare"`
	// LoadGenerator is the load generator's CPU per write, not counted
	// (the machine probe's included). It grows with the system's latency
	// too (fewer answers per wake-up): the machine probe (casOutcome's
	// Machine) is what tells a slower machine from a slower eskv.
	LoadGenerator float64 `json:"loadGeneratorCpuMicrosPerWrite,omitempty"`
	// Rounds is what the writer's metrics say of its transaction rounds
	// over the window: whether a slower window had fewer rounds, smaller
	// ones, or longer ones.
	Rounds writerRounds `json:"writerRounds"`
}

// writerRounds is the writer's shared transactions over a window, from
// two scrapes of its /metrics: rounds committed per second, writes
// decided per round, the mean time to decide and commit a partition's
// batch and, of it, the mean time a batch that appends spends in its
// round (the rest is reading and deciding), and the share of reads confirmed by a last-stable-offset
// request (the slow way: no lease or fence was at hand).
type writerRounds struct {
	PerSec       float64 `json:"perSec"`
	WritesPer    float64 `json:"writesPerRound"`
	BatchMillis  float64 `json:"batchMillis"`
	CommitMillis float64 `json:"commitMillis"`
	ReadsByLSO   float64 `json:"readsConfirmedByLsoShare"`
	ReadsConfirm float64 `json:"readsConfirmed"`
}

// roundsBetween is writerRounds over seconds between two scrapes of the
// writer (the zero value when either is missing).
func roundsBetween(before, after metrics, seconds float64) writerRounds {
	if before == nil || after == nil || seconds <= 0 {
		return writerRounds{}
	}
	d := func(name string, labels ...string) float64 {
		return after.sum(name, labels...) - before.sum(name, labels...)
	}
	var r writerRounds
	rounds := d("eskv_writer_transactions_total")
	r.PerSec = rounds / seconds
	if rounds > 0 {
		r.WritesPer = d("eskv_writer_batch_size_sum") / rounds
	}
	if n := d("eskv_writer_batch_seconds_count"); n > 0 {
		r.BatchMillis = 1000 * d("eskv_writer_batch_seconds_sum") / n
	}
	if n := d("eskv_writer_batch_commit_seconds_count"); n > 0 {
		r.CommitMillis = 1000 * d("eskv_writer_batch_commit_seconds_sum") / n
	}
	r.ReadsConfirm = d("eskv_writer_read_confirms_total")
	if r.ReadsConfirm > 0 {
		r.ReadsByLSO = d("eskv_writer_read_confirms_total", `by="lso"`) / r.ReadsConfirm
	}
	return r
}

// walPosition is the cluster's WAL position in bytes, and its
// checkpoints so far (0, 0 when they cannot be read).
func (b *bench) walPosition(ctx context.Context) (lsn, checkpoints int64) {
	if b.s.db == nil {
		return 0, 0
	}
	_ = b.s.db.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
		checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter`).Scan(&lsn, &checkpoints)
	return lsn, checkpoints
}

// sustainFigure is figure 22.
type sustainFigure struct {
	Clients     int             `json:"clients"`
	Window      string          `json:"window"`
	Windows     []sustainWindow `json:"windows"`
	LastOverFst float64         `json:"lastOverFirst"`
	Verdict     string          `json:"verdict"`
	// ProbeR is the correlation (Pearson's r) of the windows' ok/s with
	// the machine probe's time per window, hash then memory; ProbeROK
	// false when it cannot be computed (fewer than three windows, or a
	// series that does not move). Near −1: the windows' ok/s follow the
	// machine's speed, and a last window below the first may be the
	// machine's as much as eskv's.
	ProbeR   [2]float64 `json:"okPerSecProbeCorrelation"`
	ProbeROK bool       `json:"okPerSecProbeCorrelationKnown"`
}

// pearson is the correlation coefficient of xs and ys (equal lengths);
// false for fewer than three pairs or a series without variance.
func pearson(xs, ys []float64) (float64, bool) {
	n := float64(len(xs))
	if len(xs) < 3 || len(xs) != len(ys) {
		return 0, false
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i] / n
		my += ys[i] / n
	}
	var sxy, sxx, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return 0, false
	}
	return sxy / math.Sqrt(sxx*syy), true
}

// sustain is figure 22.
func (b *bench) sustain(ctx context.Context, rep *report) error {
	projects := b.peerProjects()
	keys := make([]string, b.c.peerClients)
	for k := range keys {
		keys[k] = b.key(projects[k%len(projects)], fmt.Sprintf("sustain-%s-k%03d", b.runID, k))
	}
	t := &eskvTarget{b: b}
	if err := t.setup(ctx, keys); err != nil {
		return fmt.Errorf("figure 22: creating %d keys: %w", len(keys), err)
	}
	fig := &sustainFigure{Clients: b.c.peerClients, Window: b.c.sustainWindow.String()}
	rep.Sustain = fig
	classify := b.eskvClassifier()
	b.settle(ctx, "eskv")
	b.logf("22 read-then-CAS, %d clients, for %s in windows of %s", b.c.peerClients, b.c.sustain, b.c.sustainWindow)
	for end := time.Now().Add(b.c.sustain); ctx.Err() == nil; {
		left := time.Until(end)
		if left < b.c.sustainWindow/2 {
			break
		}
		var before cpuSample
		if classify != nil {
			before = sampleCPU("/proc", classify)
		}
		machine0, _ := readMachineCPU("/proc")
		lsn0, _ := b.walPosition(ctx)
		writer0 := b.scrape(ctx, b.s.writerURL)
		w := sustainWindow{casOutcome: driveCAS(ctx, t, keys, b.c.peerClients, min(left, b.c.sustainWindow))}
		w.Rounds = roundsBetween(writer0, b.scrape(ctx, b.s.writerURL), w.Seconds)
		lsn1, checkpoints := b.walPosition(ctx)
		w.Checkpoints = checkpoints
		if lsn0 > 0 && w.OK > 0 {
			w.WALPerWrite = float64(lsn1-lsn0) / float64(w.OK)
		}
		if machine1, ok := readMachineCPU("/proc"); ok {
			w.Steal = machine1.stealShare(machine0)
		}
		if before != nil {
			cpu := newCPUReport(sampleCPU("/proc", classify).since(before, classify), w.OK, w.Seconds)
			w.CPUMicrosPerWrite, w.TopCPU, w.LoadGenerator = cpu.MicrosPerWrite, cpu.topKinds(3), cpu.microsPerWrite(kindLoadGenerator)
		}
		if b.s.writerPID != 0 {
			w.WriterRSS, _ = stats.StatusBytes(b.s.writerPID, "VmRSS")
		}
		if b.s.db != nil {
			_ = b.s.db.QueryRow(ctx, `SELECT pg_total_relation_size('kv_entries'), pg_total_relation_size('kv_history'),
				e.n_dead_tup, e.autovacuum_count, h.autovacuum_count
				FROM pg_stat_user_tables e, pg_stat_user_tables h WHERE e.relname = 'kv_entries' AND h.relname = 'kv_history'`).
				Scan(&w.EntriesBytes, &w.HistoryBytes, &w.DeadEntries, &w.Vacuums, &w.HistoryVacuums)
		}
		b.logf("22 window %d: %.0f ok/s", len(fig.Windows)+1, w.OKPerSec)
		fig.Windows = append(fig.Windows, w)
	}
	fig.judge()
	return ctx.Err()
}

// fmtPerWrite prints bytes per write, "-" when not measured.
func fmtPerWrite(b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f B", b)
}

// judge sets the last window's ok/s over the first's, and the verdict.
func (f *sustainFigure) judge() {
	if len(f.Windows) < 2 || f.Windows[0].OKPerSec == 0 {
		f.Verdict = verdictSkip
		return
	}
	f.LastOverFst = f.Windows[len(f.Windows)-1].OKPerSec / f.Windows[0].OKPerSec
	var ok, hash, walk []float64
	for _, w := range f.Windows {
		ok = append(ok, w.OKPerSec)
		hash = append(hash, w.Machine.HashNsPerKiB)
		walk = append(walk, w.Machine.WalkNs)
	}
	rh, okh := pearson(ok, hash)
	rw, okw := pearson(ok, walk)
	f.ProbeR, f.ProbeROK = [2]float64{rh, rw}, okh && okw
	f.Verdict = verdictMiss
	if f.LastOverFst >= targetSustainRatio {
		f.Verdict = verdictPass
	}
}

// printSustain prints figure 22, one line per window.
func (r *report) printSustain(w io.Writer) error {
	f := r.Sustain
	if f == nil {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "22  read-then-CAS, %d clients on eskv alone, ok/s per window of %s: last ÷ first %.2f (target ≥ %.1f) %s\n",
		f.Clients, f.Window, f.LastOverFst, targetSustainRatio, f.Verdict)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "window\tok/s\tCAS p50\tCAS p99\terrors\tCPU µs/write\twriter RSS\tkv_entries\tkv_history\tdead rows\tautovacuums\thistory autovacuums\tWAL/write\tcheckpoints\tsteal\tmost CPU µs/write\tload generator µs/write\tprobe hash ns/KiB\tprobe memory ns")
	var series []string
	for i, s := range f.Windows {
		series = append(series, fmt.Sprintf("%.0f", s.OKPerSec))
		fmt.Fprintf(tw, "%d\t%.0f\t%s\t%s\t%d\t%.0f\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%.1f %%\t%s\t%.0f\t%.0f\t%.0f\n", i+1, s.OKPerSec,
			fmtDuration(time.Duration(s.P50)), fmtDuration(time.Duration(s.P99)), s.Errors, s.CPUMicrosPerWrite,
			fmtBytes(s.WriterRSS), fmtBytes(s.EntriesBytes), fmtBytes(s.HistoryBytes), s.DeadEntries, s.Vacuums,
			s.HistoryVacuums, fmtPerWrite(s.WALPerWrite), s.Checkpoints, 100*s.Steal, cmp.Or(s.TopCPU, "-"), s.LoadGenerator,
			s.Machine.HashNsPerKiB, s.Machine.WalkNs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "    series (ok/s): %s\n", strings.Join(series, " "))
	fmt.Fprintln(w, "    the writer's rounds per window (its /metrics):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    window\trounds/s\twrites/round\tbatch ms (mean)\tof it in the round\treads confirmed\tby last stable offset")
	for i, s := range f.Windows {
		r := s.Rounds
		fmt.Fprintf(tw, "    %d\t%.0f\t%.1f\t%.2f\t%.2f\t%.0f\t%.1f %%\n", i+1, r.PerSec, r.WritesPer, r.BatchMillis, r.CommitMillis, r.ReadsConfirm, 100*r.ReadsByLSO)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := len(f.Windows); n > 1 {
		fmt.Fprintf(w, "    machine probe, the last window's time ÷ the first's: %s (above 1: the machine, not eskv, got slower)\n",
			f.Windows[n-1].Machine.ratio(f.Windows[0].Machine))
	}
	if f.ProbeROK {
		fmt.Fprintf(w, "    the windows' ok/s against the probe's time per window: r = %.2f (hash), %.2f (memory) (near −1: eskv's ok/s follow the machine's speed)\n",
			f.ProbeR[0], f.ProbeR[1])
	}
	return nil
}
