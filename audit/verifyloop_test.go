package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/testenv"
)

// TestPeriodicVerify: with VerifyInterval set, the auditor verifies the
// trail on its own: runs pass (outcome ok, 0 discrepancies) while the
// trail matches the log; once a row is deleted in ClickHouse, a run
// counts outcome discrepancy and eskv_auditor_verify_discrepancies says
// how many.
func TestPeriodicVerify(t *testing.T) {
	b := testenv.MustBroker(t, 4)
	s, ch := mustStore(t)
	h := synth("pv", 5, 3, time.Now().UTC().Truncate(time.Microsecond))
	produce(t, b, h, false)
	reg := prometheus.NewRegistry()
	a := runAuditor(t, b, s, audit.Config{Group: audit.Group, VerifyInterval: 50 * time.Millisecond}, nil, reg)
	waitCaughtUp(t, b, a)
	value := func(name, outcome string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if l := m.GetLabel(); outcome == "" || (len(l) == 1 && l[0].GetValue() == outcome) {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	if v := value("eskv_auditor_verify_runs_total", "discrepancy"); v != 0 {
		t.Fatalf("runs with discrepancies %v before any run, want 0 (exported at 0)", v)
	}
	testenv.WaitFor(t, 60*time.Second, "a passing periodic verification", func() bool {
		return value("eskv_auditor_verify_runs_total", "ok") >= 1
	})
	if v := value("eskv_auditor_verify_discrepancies", ""); v != 0 {
		t.Fatalf("discrepancies %v after a passing run", v)
	}
	if v := value("eskv_auditor_verify_last_run_timestamp_seconds", ""); v <= 0 {
		t.Fatalf("last run %v", v)
	}
	st := a.Verification()
	if l := st.Last; st.IntervalSeconds != 0.05 || l == nil || l.Outcome != audit.VerifyOK || l.Reason != "" || l.Events != 15 || l.Keys != 5 ||
		len(l.Partitions) != 4 || l.FinishedAt.Before(l.StartedAt) || l.StartedAt.Before(st.Since) {
		t.Fatalf("verification after a passing run: %+v (last %+v), want ok over 15 events of 5 keys in 4 partitions", st, l)
	}
	mutate(t, ch, "ALTER TABLE audit_events DELETE WHERE key = ? AND version = 2", h.events[1].Key)
	testenv.WaitFor(t, 60*time.Second, "a periodic verification to find the deleted row", func() bool {
		return value("eskv_auditor_verify_runs_total", "discrepancy") >= 1 && value("eskv_auditor_verify_discrepancies", "") >= 1
	})
	testenv.WaitFor(t, 10*time.Second, "the last verification to say discrepancy", func() bool {
		l := a.Verification().Last
		return l != nil && l.Outcome == audit.VerifyDiscrepancy
	})
	if l := a.Verification().Last; l.Discrepancies < 1 || !strings.Contains(l.Reason, audit.ProblemRowMissing+" at version 2 of key "+h.events[1].Key) {
		t.Errorf("last verification %+v: want its reason to name the missing row", l)
	}
	if v := value("eskv_auditor_verify_runs_total", "error"); v != 0 {
		t.Errorf("runs that could not run: %v", v)
	}
}
