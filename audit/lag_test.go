package audit_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/testenv"
)

// TestOffsetLag: eskv_auditor_offset_lag has a series per topic and
// partition of both topics, and is 0 on each once the auditor caught up.
func TestOffsetLag(t *testing.T) {
	b := testenv.MustBroker(t, 4)
	s, _ := mustStore(t)
	produce(t, b, synth("lag", 20, 3, time.Now().UTC().Truncate(time.Microsecond)), false)
	reg := prometheus.NewRegistry()
	a := runAuditor(t, b, s, audit.Config{Group: "lag", LagInterval: 20 * time.Millisecond}, nil, reg)
	waitCaughtUp(t, b, a)
	var lags map[string]float64
	testenv.WaitFor(t, 30*time.Second, "the offset lag of every partition of both topics to be 0", func() bool {
		lags = map[string]float64{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "eskv_auditor_offset_lag" {
				continue
			}
			for _, m := range mf.GetMetric() {
				id := ""
				for _, l := range m.GetLabel() {
					id += l.GetValue() + "/"
				}
				lags[id] = m.GetGauge().GetValue()
			}
		}
		if len(lags) != 8 {
			return false
		}
		for _, tp := range []string{b.Topics.Changes, b.Topics.Conflicts} {
			for p := range 4 {
				if v, ok := lags[strconv.Itoa(p)+"/"+tp+"/"]; !ok || v != 0 {
					return false
				}
			}
		}
		return true
	})
}
