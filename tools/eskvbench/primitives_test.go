package main

import "testing"

func TestMetricSumLabels(t *testing.T) {
	m := mustMetrics(t, `# TYPE eskv_writer_swept_total counter
eskv_writer_swept_total{outcome="expired"} 9000
eskv_writer_swept_total{outcome="skipped"} 12
eskv_writer_swept_totally 5
eskv_writer_sweep_seconds_sum 0.625
eskv_writer_sweep_seconds_count 4
`)
	for _, tc := range []struct {
		name string
		only []string
		want float64
	}{
		{"eskv_writer_swept_total", nil, 9012},
		{"eskv_writer_swept_total", []string{`outcome="expired"`}, 9000},
		{"eskv_writer_swept_total", []string{`outcome="none"`}, 0},
		{"eskv_writer_sweep_seconds_sum", nil, 0.625},
		{"eskv_writer_sweep_seconds_count", nil, 4},
	} {
		if got := m.sum(tc.name, tc.only...); got != tc.want {
			t.Errorf("metricSum(%s, %v) = %v, want %v", tc.name, tc.only, got, tc.want)
		}
	}
}
