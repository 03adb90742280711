package main

import (
	"fmt"
	"io"
	"time"
)

// Figure 18's targets (issue P6): eskv's ok/s (the mean of its runs of a
// scenario) over a peer's in the same run, eskv's CAS p50 with one
// client, and its CPU per acknowledged write over 18a's runs.
var peerTargets = []struct {
	step, peer string
	ratio      float64
}{
	{"18a", "postgres", 1.0},
	{"18a", "etcd", 1.5},
	{"18b", "etcd", 1.0},
	{"18c", "etcd", 1.0},
}

const (
	targetSingleCASP50    = 500 * time.Microsecond
	targetMicrosPerWrite  = 120.0
	peerTargetUnavailable = "the peer did not run"
)

// peerVerdict is one target's line.
type peerVerdict struct {
	Target, Result, Verdict string
}

// targets judges the figure against peerTargets, the one-client p50 and
// the CPU per write.
func (f *peerFigure) targets() []peerVerdict {
	f.ratios()
	var out []peerVerdict
	for _, t := range peerTargets {
		v := peerVerdict{Target: fmt.Sprintf("%s eskv ≥ %.1f× %s", t.step, t.ratio, t.peer), Verdict: verdictSkip, Result: peerTargetUnavailable}
		for _, r := range f.Rows {
			if r.Step == t.step && r.System == t.peer && r.Ratio > 0 {
				v.Result, v.Verdict = fmt.Sprintf("%.2f×", r.Ratio), judge(r.Ratio >= t.ratio)
			}
		}
		out = append(out, v)
	}
	for _, r := range f.Rows {
		if r.Step == "18b" && r.System == "eskv" && !r.Again && r.OK > 0 {
			out = append(out, peerVerdict{Target: "18b eskv CAS p50 ≤ " + fmtDuration(targetSingleCASP50),
				Result: fmtDuration(time.Duration(r.P50)), Verdict: judge(time.Duration(r.P50) <= targetSingleCASP50)})
		}
	}
	var cpu float64
	var writes int
	for _, r := range f.Rows {
		if r.Step == "18a" && r.System == "eskv" && r.CPU != nil {
			cpu += r.CPU.TotalSeconds
			writes += r.OK
		}
	}
	if writes > 0 {
		us := cpu / float64(writes) * 1e6
		out = append(out, peerVerdict{Target: fmt.Sprintf("18a eskv CPU per acknowledged write ≤ %.0f µs", targetMicrosPerWrite),
			Result: fmt.Sprintf("%.0f µs", us), Verdict: judge(us <= targetMicrosPerWrite)})
	}
	return out
}

func judge(ok bool) string {
	if ok {
		return verdictPass
	}
	return verdictMiss
}

// printTargets prints figure 18's targets, one per line.
func (f *peerFigure) printTargets(w io.Writer) {
	for _, v := range f.targets() {
		fmt.Fprintf(w, "18 target: %-48s %-10s %s\n", v.Target, v.Result, v.Verdict)
	}
}
