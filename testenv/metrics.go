package testenv

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricSum returns the sum of the counter and gauge samples of the
// metric name in reg whose labels include label ("name=value"), or of all
// its samples when label is "".
func MetricSum(tb testing.TB, reg prometheus.Gatherer, name, label string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := label == ""
			for _, lp := range m.GetLabel() {
				ok = ok || lp.GetName()+"="+lp.GetValue() == label
			}
			if !ok {
				continue
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}
