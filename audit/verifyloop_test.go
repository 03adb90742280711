package audit_test

import (
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
	mutate(t, ch, "ALTER TABLE audit_events DELETE WHERE key = ? AND version = 2", h.events[1].Key)
	testenv.WaitFor(t, 60*time.Second, "a periodic verification to find the deleted row", func() bool {
		return value("eskv_auditor_verify_runs_total", "discrepancy") >= 1 && value("eskv_auditor_verify_discrepancies", "") >= 1
	})
	if v := value("eskv_auditor_verify_runs_total", "error"); v != 0 {
		t.Errorf("runs that could not run: %v", v)
	}
}
