package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestSustainJudge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		okps    []float64
		verdict string
	}{
		{"PassFlat", []float64{1000, 990, 950}, verdictPass},
		{"PassAtBound", []float64{1000, 800, 900}, verdictPass},
		{"MissDecay", []float64{1000, 900, 899}, verdictMiss},
		{"SkipOneWindow", []float64{1000}, verdictSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &sustainFigure{}
			for _, v := range tc.okps {
				f.Windows = append(f.Windows, sustainWindow{casOutcome: casOutcome{OKPerSec: v}})
			}
			f.judge()
			if f.Verdict != tc.verdict {
				t.Errorf("verdict %s (ratio %.3f), want %s", f.Verdict, f.LastOverFst, tc.verdict)
			}
		})
	}
}

func TestPrintSustain(t *testing.T) {
	f := &sustainFigure{Clients: 64, Window: "1m0s", Windows: []sustainWindow{
		{casOutcome: casOutcome{OKPerSec: 6000}, CPUMicrosPerWrite: 150, WriterRSS: 80 << 20, DeadEntries: 1200},
		{casOutcome: casOutcome{OKPerSec: 5100}, CPUMicrosPerWrite: 170, WriterRSS: 90 << 20, DeadEntries: 90000, Vacuums: 0,
			HistoryVacuums: 4, WALPerWrite: 3 << 10, Checkpoints: 7, Steal: 0.125, TopCPU: "writer 98, postgres 85", LoadGenerator: 61},
	}}
	f.Windows[1].Rounds = writerRounds{PerSec: 412, WritesPer: 12.4, BatchMillis: 3.25, CommitMillis: 2.5, ReadsConfirm: 30000, ReadsByLSO: 0.015}
	f.Windows[0].Machine = machineSpeed{HashNsPerKiB: 1000, WalkNs: 80, Samples: 60}
	f.Windows[1].Machine = machineSpeed{HashNsPerKiB: 1250, WalkNs: 88, Samples: 60}
	f.judge()
	var b strings.Builder
	if err := (&report{Sustain: f}).printSustain(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"last ÷ first 0.85 (target ≥ 0.9) MISS", "series (ok/s): 6000 5100", "90000", "4                    3072 B     7            12.5 %  writer 98, postgres 85  61",
		"1250               88", "the last window's time ÷ the first's: 1.25 (hash), 1.10 (memory)",
		"    2       412       12.4          3.25             2.50                30000            1.5 %"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}

// TestProbeCorrelation: figure 22 says how closely its windows' ok/s
// follow the machine probe, here a run of VM-C (2026-12-01 10:46 UTC)
// whose ok/s rose by half while the probe's memory time fell by a sixth.
func TestProbeCorrelation(t *testing.T) {
	okPerSec := []float64{7532, 7951, 8124, 6919, 6909, 6850, 7119, 8220, 9802, 10750}
	walk := []float64{194, 199, 185, 194, 199, 197, 193, 186, 172, 164}
	f := &sustainFigure{Clients: 64, Window: "1m0s"}
	for i := range okPerSec {
		f.Windows = append(f.Windows, sustainWindow{casOutcome: casOutcome{OKPerSec: okPerSec[i], Machine: machineSpeed{HashNsPerKiB: 520, WalkNs: walk[i]}}})
	}
	f.Windows[0].Machine.HashNsPerKiB = 530
	f.judge()
	if !f.ProbeROK || f.ProbeR[1] > -0.85 || f.ProbeR[1] < -0.95 {
		t.Errorf("memory r = %.3f (known %v), want about -0.9", f.ProbeR[1], f.ProbeROK)
	}
	var b strings.Builder
	if err := (&report{Sustain: f}).printSustain(&b); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("r = %.2f (hash), %.2f (memory)", f.ProbeR[0], f.ProbeR[1]); !strings.Contains(b.String(), want) {
		t.Errorf("no %q in:\n%s", want, b.String())
	}
	for _, c := range []struct {
		xs, ys []float64
		r      float64
		ok     bool
	}{
		{[]float64{1, 2, 3}, []float64{6, 4, 2}, -1, true},
		{[]float64{1, 2, 3, 4}, []float64{1, 2, 3, 4}, 1, true},
		{[]float64{1, 2}, []float64{2, 1}, 0, false},       // two points say nothing
		{[]float64{1, 2, 3}, []float64{5, 5, 5}, 0, false}, // a probe that never moved
	} {
		r, ok := pearson(c.xs, c.ys)
		if ok != c.ok || math.Abs(r-c.r) > 1e-9 {
			t.Errorf("pearson(%v, %v) = %v, %v; want %v, %v", c.xs, c.ys, r, ok, c.r, c.ok)
		}
	}
}

func TestPeerTargets(t *testing.T) {
	cpu := &cpuReport{TotalSeconds: 1.0}
	f := &peerFigure{Rows: []peerRow{
		{Step: "18a", System: "eskv", casOutcome: casOutcome{OK: 10000, OKPerSec: 12000}, CPU: cpu},
		{Step: "18a", System: "postgres", casOutcome: casOutcome{OKPerSec: 10000}},
		{Step: "18a", System: "etcd", casOutcome: casOutcome{OKPerSec: 9000}},
		{Step: "18b", System: "eskv", casOutcome: casOutcome{OK: 100, OKPerSec: 1500, P50: ms(450 * time.Microsecond)}},
		{Step: "18b", System: "etcd", casOutcome: casOutcome{OKPerSec: 2000}},
	}}
	got := map[string]string{}
	for _, v := range f.targets() {
		got[v.Target] = v.Result + " " + v.Verdict
	}
	for target, want := range map[string]string{
		"18a eskv ≥ 1.0× postgres":                     "1.20× PASS",
		"18a eskv ≥ 1.5× etcd":                         "1.33× MISS",
		"18b eskv ≥ 1.0× etcd":                         "0.75× MISS",
		"18c eskv ≥ 1.0× etcd":                         peerTargetUnavailable + " SKIP",
		"18b eskv CAS p50 ≤ 0.50ms":                    "0.45ms PASS",
		"18a eskv CPU per acknowledged write ≤ 120 µs": "100 µs PASS",
	} {
		if got[target] != want {
			t.Errorf("%s: %q, want %q (all: %v)", target, got[target], want, got)
		}
	}
}

// TestRoundsBetween: figure 22's writer rounds come from the difference
// of two scrapes of the writer's /metrics.
func TestRoundsBetween(t *testing.T) {
	// hist is a histogram of count samples summing to sum, in one bucket.
	hist := func(name string, sum, count float64) string {
		return fmt.Sprintf("# TYPE %[1]s histogram\n%[1]s_bucket{le=\"+Inf\"} %[3]v\n%[1]s_sum %[2]v\n%[1]s_count %[3]v\n", name, sum, count)
	}
	scrape := func(txns, batchSum, batchSecSum, batchSecCount, commitSecSum, lease, lso float64) metrics {
		m, err := parseMetrics(strings.NewReader(fmt.Sprintf("# TYPE eskv_writer_transactions_total counter\neskv_writer_transactions_total %v\n", txns) +
			hist("eskv_writer_batch_size", batchSum, batchSecCount) +
			hist("eskv_writer_batch_seconds", batchSecSum, batchSecCount) +
			hist("eskv_writer_batch_commit_seconds", commitSecSum, batchSecCount) +
			fmt.Sprintf("# TYPE eskv_writer_read_confirms_total counter\neskv_writer_read_confirms_total{by=\"lease\"} %v\neskv_writer_read_confirms_total{by=\"lso\"} %v\n", lease, lso)))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := scrape(100, 1000, 2, 400, 1.5, 900, 100)
	after := scrape(700, 9400, 8.5, 2400, 6.5, 19500, 500)
	got := roundsBetween(before, after, 2)
	want := writerRounds{PerSec: 300, WritesPer: 14, BatchMillis: 3.25, CommitMillis: 2.5, ReadsConfirm: 19000, ReadsByLSO: 400.0 / 19000}
	if got != want {
		t.Fatalf("roundsBetween: %+v; want %+v", got, want)
	}
	if got := roundsBetween(nil, after, 2); got != (writerRounds{}) {
		t.Fatalf("without a first scrape: %+v; want nothing", got)
	}
}
