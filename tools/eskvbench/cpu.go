package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// This file measures the CPU a system spends over one run of figure 18:
// utime+stime of every process that belongs to it, read from /proc before
// and after the run. Postgres and ClickHouse are shared (other databases,
// other tests), so their processes are told apart by what /proc says they
// are: a Postgres backend names its database in its command line.

// procInfo is one process as /proc shows it.
type procInfo struct {
	PID     int
	Comm    string  // the command name of /proc/<pid>/stat (15 bytes at most)
	Cmdline string  // /proc/<pid>/cmdline with NULs as spaces
	CPU     float64 // utime + stime, seconds
}

// parseStat reads the command name and utime+stime of a /proc/<pid>/stat
// line (parseStatCPU does the fields).
func parseStat(stat string) (comm string, cpu float64, err error) {
	i, j := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if i < 0 || j < i {
		return "", 0, fmt.Errorf("stat: no command name in %q", truncate(stat, 80))
	}
	cpu, err = parseStatCPU(stat)
	return stat[i+1 : j], cpu, err
}

// readProc reads process pid; ok is false when it is gone or unreadable
// (it exited between the listing and the read).
func readProc(root string, pid int) (procInfo, bool) {
	dir := filepath.Join(root, strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return procInfo{}, false
	}
	comm, cpu, err := parseStat(string(stat))
	if err != nil {
		return procInfo{}, false
	}
	cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	return procInfo{PID: pid, Comm: comm, Cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")), CPU: cpu}, true
}

// classifier names the kind of a process to count, or "" to leave it out.
type classifier func(p procInfo) string

// cpuSample is the CPU of every process a classifier counts, by pid.
type cpuSample map[int]procInfo

// sampleCPU walks root (/proc) and keeps the processes classify counts.
func sampleCPU(root string, classify classifier) cpuSample {
	s := cpuSample{}
	entries, err := os.ReadDir(root)
	if err != nil {
		return s
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(root, pid); ok && classify(p) != "" {
			s[pid] = p
		}
	}
	return s
}

// cpuDelta is the CPU seconds each kind of process used between two
// samples. A process that started in between counts from zero; one that
// exited in between is lost (its CPU is no longer readable) and, when its
// kind is counted, counted in Exited.
type cpuDelta struct {
	Seconds map[string]float64 `json:"seconds"`
	Exited  int                `json:"exited,omitempty"`
}

func (after cpuSample) since(before cpuSample, classify classifier) cpuDelta {
	d := cpuDelta{Seconds: map[string]float64{}}
	for pid, a := range after {
		used := a.CPU
		if b, ok := before[pid]; ok && b.Comm == a.Comm {
			used -= b.CPU
		}
		d.Seconds[classify(a)] += used
	}
	for pid, b := range before {
		if _, ok := after[pid]; !ok && !uncounted[classify(b)] {
			d.Exited++
		}
	}
	return d
}

// Kinds of the shared servers' processes.
const (
	kindPostgres      = "postgres (backends of the run's database)"
	kindPostgresBg    = "postgres (postmaster, WAL and background writers)"
	kindPostgresOther = "postgres (backends of other databases)"
	kindClickHouse    = "clickhouse"
)

// postgresKind classifies a Postgres process for database db: its
// backends, the shared background processes, or another database's
// backend; "" when p is no Postgres process. A backend's command line is
// "postgres: [15/main: ]user database host(port) activity".
func postgresKind(p procInfo, db string) string {
	if p.Comm != "postgres" {
		return ""
	}
	rest, ok := strings.CutPrefix(p.Cmdline, "postgres: ")
	if !ok {
		return kindPostgresBg // the postmaster
	}
	f := strings.Fields(rest)
	if len(f) > 0 && strings.HasSuffix(f[0], ":") { // Debian's cluster name
		f = f[1:]
	}
	if len(f) < 3 || !(strings.Contains(f[2], "(") || f[2] == "[local]") {
		return kindPostgresBg
	}
	if f[1] == db {
		return kindPostgres
	}
	return kindPostgresOther
}

// clickhouseKind classifies the ClickHouse server (and its watchdog).
func clickhouseKind(p procInfo) string {
	if strings.HasPrefix(p.Comm, "clickhouse") {
		return kindClickHouse
	}
	return ""
}

// kindLoadGenerator is the bench itself: on the same cores, but not part
// of the system measured.
const kindLoadGenerator = "eskvbench (load generator)"

// uncounted are kinds printed for context but left out of a system's
// total.
var uncounted = map[string]bool{kindLoadGenerator: true, kindPostgresOther: true}

// cpuKind is the CPU one kind of process used.
type cpuKind struct {
	Kind    string  `json:"kind"`
	Seconds float64 `json:"seconds"`
	Counted bool    `json:"counted"`
}

// cpuReport is a system's CPU over one run: by kind, the total of the
// counted kinds, and that total per acknowledged write.
type cpuReport struct {
	Kinds          []cpuKind `json:"kinds"`
	TotalSeconds   float64   `json:"totalSeconds"`
	RunSeconds     float64   `json:"runSeconds"`
	Writes         int       `json:"acknowledgedWrites"`
	MicrosPerWrite float64   `json:"cpuMicrosPerWrite,omitempty"`
	Exited         int       `json:"exitedProcesses,omitempty"`
}

// newCPUReport sums d over writes acknowledged in a run of runSeconds;
// kinds are sorted by CPU, the largest first.
func newCPUReport(d cpuDelta, writes int, runSeconds float64) *cpuReport {
	r := &cpuReport{Writes: writes, RunSeconds: runSeconds, Exited: d.Exited}
	for k, s := range d.Seconds {
		r.Kinds = append(r.Kinds, cpuKind{Kind: k, Seconds: s, Counted: !uncounted[k]})
		if !uncounted[k] {
			r.TotalSeconds += s
		}
	}
	slices.SortFunc(r.Kinds, func(a, b cpuKind) int {
		if c := cmp.Compare(b.Seconds, a.Seconds); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	})
	if writes > 0 {
		r.MicrosPerWrite = r.TotalSeconds / float64(writes) * 1e6
	}
	return r
}

// print writes the report, each line after indent.
func (r *cpuReport) print(w io.Writer, indent string) {
	var counted, other []string
	for _, k := range r.Kinds {
		s := fmt.Sprintf("%s %.2f s", k.Kind, k.Seconds)
		if k.Counted {
			counted = append(counted, s)
		} else {
			other = append(other, s)
		}
	}
	fmt.Fprintf(w, "%s%s\n", indent, strings.Join(counted, ", "))
	fmt.Fprintf(w, "%stotal %.2f CPU-s in %.1f s (%.2f cores) for %d acknowledged writes = %.0f µs CPU per acknowledged write\n",
		indent, r.TotalSeconds, r.RunSeconds, r.TotalSeconds/max(r.RunSeconds, 1e-9), r.Writes, r.MicrosPerWrite)
	if len(other) > 0 {
		fmt.Fprintf(w, "%snot counted: %s\n", indent, strings.Join(other, ", "))
	}
	if r.Exited > 0 {
		fmt.Fprintf(w, "%s%d counted processes exited during the run (their CPU is lost to /proc)\n", indent, r.Exited)
	}
}

// machineCPU is the first line of root/stat (/proc/stat): the jiffies all
// CPUs spent busy and in all, since boot.
type machineCPU struct {
	busy, total, steal float64
}

// readMachineCPU reads root/stat; ok is false when it cannot (no /proc).
// Idle and iowait count as not busy; steal counts as busy (the VM's
// host ran something else: the machine was not ours either).
func readMachineCPU(root string) (m machineCPU, ok bool) {
	b, err := os.ReadFile(filepath.Join(root, "stat"))
	if err != nil {
		return m, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return m, false
	}
	for i, s := range f[1:] {
		if i >= 8 { // guest and guest_nice are already in user and nice
			break
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return m, false
		}
		m.total += v
		if i != 3 && i != 4 { // idle, iowait
			m.busy += v
		}
		if i == 7 {
			m.steal = v
		}
	}
	return m, true
}

// stealShare is the share of the machine's CPU time between before and
// m that its VM's host ran something else (0 to 1).
func (m machineCPU) stealShare(before machineCPU) float64 {
	if dt := m.total - before.total; dt > 0 {
		return (m.steal - before.steal) / dt
	}
	return 0
}

// topKinds returns the counted kinds' CPU per acknowledged write, the
// largest n first ("writer 93, postgres 30"); "-" without writes.
func (r *cpuReport) topKinds(n int) string {
	if r.Writes == 0 {
		return "-"
	}
	var parts []string
	for _, k := range r.Kinds {
		if k.Counted && len(parts) < n {
			name, _, _ := strings.Cut(k.Kind, " (") // "postgres (backends of …)": postgres
			parts = append(parts, fmt.Sprintf("%s %.0f", name, k.Seconds/float64(r.Writes)*1e6))
		}
	}
	return strings.Join(parts, ", ")
}

// microsPerWrite is kind's CPU per acknowledged write (0 without writes
// or without the kind).
func (r *cpuReport) microsPerWrite(kind string) float64 {
	if r.Writes == 0 {
		return 0
	}
	for _, k := range r.Kinds {
		if k.Kind == kind {
			return k.Seconds / float64(r.Writes) * 1e6
		}
	}
	return 0
}

// busyShare is the share of the machine's CPU time busy between before
// and m (0 to 1; 0 when no time passed).
func (m machineCPU) busyShare(before machineCPU) float64 {
	if dt := m.total - before.total; dt > 0 {
		return (m.busy - before.busy) / dt
	}
	return 0
}
