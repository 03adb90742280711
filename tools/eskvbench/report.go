package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Verdicts.
const (
	verdictPass = "PASS"
	verdictMiss = "MISS"
	verdictSkip = "SKIP"
)

type targetKind int

const (
	targetP50 targetKind = iota
	targetP99
	targetThroughput
)

// result is one measured figure.
type result struct {
	Step      string         `json:"step"`
	Title     string         `json:"title"`
	Ops       int            `json:"ops"`
	Errors    int            `json:"errors"`
	ErrorsBy  map[string]int `json:"errorsByStatus,omitempty"`
	Seconds   float64        `json:"seconds,omitempty"`
	OpsPerSec float64        `json:"opsPerSec,omitempty"`
	P50       ms             `json:"p50Ms"`
	P99       ms             `json:"p99Ms"`
	Max       ms             `json:"maxMs,omitempty"`
	Target    string         `json:"target,omitempty"`
	Verdict   string         `json:"verdict,omitempty"`
	Note      string         `json:"note,omitempty"`
}

// ms is a duration that marshals as fractional milliseconds.
type ms time.Duration

func (d ms) MarshalJSON() ([]byte, error) {
	return json.Marshal(math.Round(float64(d)/1e3) / 1e3)
}

func seconds(s float64) ms { return ms(time.Duration(s * float64(time.Second))) }

func newResult(step, title string, s summary, errs errorCounts, elapsed time.Duration) result {
	r := result{Step: step, Title: title, Ops: s.N, Errors: errs.total(), Seconds: elapsed.Seconds(),
		P50: ms(s.P50), P99: ms(s.P99), Max: ms(s.Max)}
	if elapsed > 0 {
		r.OpsPerSec = float64(s.N) / elapsed.Seconds()
	}
	if len(errs) > 0 {
		r.ErrorsBy = map[string]int{}
		for status, n := range errs {
			name := "transport"
			if status != 0 {
				name = fmt.Sprintf("%d %s", status, http.StatusText(status))
			}
			r.ErrorsBy[name] = n
		}
	}
	return r
}

// target sets the figure's target and verdict. A figure with no samples
// is a miss.
func (r *result) target(k targetKind, limit any) {
	var pass bool
	switch k {
	case targetP50:
		d := limit.(time.Duration)
		r.Target = "p50 ≤ " + d.String()
		pass = r.Ops > 0 && time.Duration(r.P50) <= d
	case targetP99:
		d := limit.(time.Duration)
		r.Target = "p99 ≤ " + d.String()
		pass = r.Ops > 0 && time.Duration(r.P99) <= d
	case targetThroughput:
		n := limit.(int)
		r.Target = fmt.Sprintf("≥ %d/s", n)
		pass = r.OpsPerSec >= float64(n)
	}
	r.Verdict = verdictMiss
	if pass {
		r.Verdict = verdictPass
	}
}

// procReport is figure 6 for one process: its peak resident memory and
// the CPU time it used (user + system) since it started.
type procReport struct {
	Name       string  `json:"name"`
	PID        int     `json:"pid,omitempty"`
	PeakBytes  int64   `json:"peakRSSBytes,omitempty"`
	CPUSeconds float64 `json:"cpuSeconds,omitempty"`
	Note       string  `json:"note,omitempty"`
}

// processes reads figure 6 for the writer and the projector, for the
// broker when the bench started it, and for the bench itself (the load
// generator shares the machine).
func processes(s *stack) []procReport {
	ps := []procReport{{Name: "writer", PID: s.writerPID}, {Name: "projector", PID: s.projectorPID}}
	if s.brokerPID != 0 {
		ps = append(ps, procReport{Name: "devbroker", PID: s.brokerPID})
	}
	if s.auditorPID != 0 {
		ps = append(ps, procReport{Name: "auditor", PID: s.auditorPID})
	}
	ps = append(ps, procReport{Name: "eskvbench", PID: os.Getpid()})
	for i := range ps {
		p := &ps[i]
		if f, ok := s.final[p.PID]; ok && p.PID != 0 {
			*p = f
			continue
		}
		if p.PID == 0 {
			p.Note = "no pid"
			if !s.own {
				p.Note += " (give -" + p.Name + "-pid with -url)"
			}
			continue
		}
		var err error
		if p.PeakBytes, err = peakRSS(p.PID); err != nil {
			p.Note = err.Error()
			continue
		}
		if p.CPUSeconds, err = cpuSeconds(p.PID); err != nil {
			p.Note = err.Error()
		}
	}
	return ps
}

// report is everything a run prints.
type report struct {
	Mode        string         `json:"mode"`
	Services    []string       `json:"services,omitempty"`
	Config      map[string]any `json:"config"`
	Results     []result       `json:"results"`
	Peers       *peerFigure    `json:"peers,omitempty"`   // figure 18
	Sustain     *sustainFigure `json:"sustain,omitempty"` // figure 22
	Processes   []procReport   `json:"processes"`
	Host        host           `json:"host"`
	Logs        []logSummary   `json:"logs,omitempty"`
	Interrupted bool           `json:"interrupted,omitempty"`
}

func reportConfig(c config) map[string]any {
	m := map[string]any{
		"n": c.n, "duration": c.duration.String(), "clients": c.clients, "readClients": c.readClients,
		"readDuration": c.readDuration.String(), "listKeys": c.listKeys, "listN": c.listN,
		"visibilityEvery": c.visEvery, "partitions": c.partitions,
		"scanEntries": c.scanEntries, "scanN": c.scanN, "manyN": c.manyN,
		"peers": c.peers, "peerDuration": c.peerDuration.String(), "peerClients": c.peerClients,
		"sustain": c.sustain.String(), "sustainWindow": c.sustainWindow.String(), "postgres": c.postgres,
	}
	if c.scale {
		m["scaleKeys"], m["scaleProjects"], m["scaleTouch"], m["scaleTakeovers"] = c.scaleKeys, c.scaleProjects, c.scaleTouch, c.scaleTakeovers
	}
	if c.only != nil {
		m["only"] = slices.Sorted(maps.Keys(c.only))
	}
	if c.url == "" {
		m["serviceLogLevel"] = benchLogLevel
		if c.brokerDataParent != "" {
			m["brokerData"] = c.brokerDataParent
		}
	}
	return m
}

func (r *report) add(res result) { r.Results = append(r.Results, res) }

func (r *report) print(w io.Writer, asJSON bool) error {
	sort.SliceStable(r.Results, func(i, j int) bool { return r.Results[i].Step < r.Results[j].Step })
	if asJSON {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(r)
	}
	fmt.Fprintf(w, "eskvbench: %s", r.Mode)
	if lvl, ok := r.Config["serviceLogLevel"]; ok {
		fmt.Fprintf(w, " (%s; ESKV_PARTITIONS=%v, ESKV_LOG_LEVEL=%v as make run: the writer logs every write)",
			strings.Join(r.Services, ", "), r.Config["partitions"], lvl)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "host: %d CPUs, load average %.2f before the run, %.2f at its end (with the run's own load)", r.Host.CPUs, r.Host.LoadStart, r.Host.LoadEnd)
	if r.Host.LoadStart >= float64(r.Host.CPUs) {
		fmt.Fprint(w, "; other processes were busy: figures are not comparable with a quiet run")
	}
	fmt.Fprintln(w)
	if d, ok := r.Config["brokerData"]; ok {
		fmt.Fprintf(w, "broker data under %v (not the default temporary directory)\n", d)
	}
	if r.Interrupted {
		fmt.Fprintln(w, "interrupted: figures cover the part that ran")
	}
	fmt.Fprintln(w)
	if err := r.printTable(w); err != nil {
		return err
	}
	var procs []string
	for _, p := range r.Processes {
		if p.PeakBytes == 0 {
			procs = append(procs, fmt.Sprintf("%s - (%s)", p.Name, p.Note))
			continue
		}
		procs = append(procs, fmt.Sprintf("%s %s, %.1f CPU-s", p.Name, fmtBytes(p.PeakBytes), p.CPUSeconds))
	}
	fmt.Fprintf(w, "6   peak RSS (VmHWM) and CPU used: %s\n", strings.Join(procs, "; "))
	if err := r.printPeers(w); err != nil {
		return err
	}
	if err := r.printSustain(w); err != nil {
		return err
	}
	r.printNotes(w)
	return nil
}

// printTable prints one line per figure.
func (r *report) printTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tmeasure\tops\terrors\tops/s\tp50\tp99\tmax\ttarget\tresult")
	for _, res := range r.Results {
		rate := "-"
		if res.OpsPerSec > 0 {
			rate = fmt.Sprintf("%.0f", res.OpsPerSec)
		}
		p50, p99, mx := "-", "-", "-"
		if res.Ops > 0 && (res.P50 > 0 || res.P99 > 0) { // throughput-only figures have no latencies
			p50, p99 = fmtDuration(time.Duration(res.P50)), fmtDuration(time.Duration(res.P99))
			if res.Max > 0 {
				mx = fmtDuration(time.Duration(res.Max))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n",
			res.Step, res.Title, res.Ops, res.Errors, rate, p50, p99, mx, orDash(res.Target), orDash(res.Verdict))
	}
	return tw.Flush()
}

// printNotes prints the figures' notes and errors and the summaries of
// the service logs.
func (r *report) printNotes(w io.Writer) {
	fmt.Fprintln(w)
	for _, res := range r.Results {
		if res.Note != "" {
			fmt.Fprintf(w, "%-3s %s\n", res.Step+":", res.Note)
		}
		if len(res.ErrorsBy) > 0 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(res.ErrorsBy)) {
				parts = append(parts, fmt.Sprintf("%s ×%d", k, res.ErrorsBy[k]))
			}
			fmt.Fprintf(w, "%-3s errors: %s\n", res.Step+":", strings.Join(parts, ", "))
		}
	}
	if len(r.Logs) > 0 {
		fmt.Fprintln(w)
		for _, l := range r.Logs {
			fmt.Fprintf(w, "log %s: %d WARN, %d ERROR, %d non-JSON lines\n", l.Service, l.Warn, l.Error, l.Other)
			for _, m := range slices.Sorted(maps.Keys(l.Messages)) {
				fmt.Fprintf(w, "    %6d× %s\n", l.Messages[m], m)
			}
			for _, s := range l.Samples {
				fmt.Fprintf(w, "    e.g. %s\n", s)
			}
		}
	}
}

// host is the machine the bench ran on; the load shows whether other work
// competed with the stack.
type host struct {
	CPUs      int     `json:"cpus"`
	LoadStart float64 `json:"loadAvg1Start"`
	LoadEnd   float64 `json:"loadAvg1End"`
}

// loadAvg returns the one-minute load average (0 where /proc is absent).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func fmtSeconds(s float64) string { return fmtDuration(time.Duration(s * float64(time.Second))) }

func gtIf(b bool) string {
	if b {
		return ">"
	}
	return ""
}

func fmtBytes(n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
