package main

import "testing"

const auditorExposition = `# TYPE eskv_auditor_rows_total counter
eskv_auditor_rows_total{table="audit_conflicts"} 5
eskv_auditor_rows_total{table="audit_events"} 120
# TYPE eskv_auditor_next_offset gauge
eskv_auditor_next_offset{partition="0",topic="kv.changes"} 70
eskv_auditor_next_offset{partition="1",topic="kv.changes"} 60
eskv_auditor_next_offset{partition="0",topic="kv.conflicts"} 6
go_goroutines 12
`

func TestMetricSum(t *testing.T) {
	m := mustMetrics(t, auditorExposition)
	if got := m.sum("eskv_auditor_rows_total"); got != 125 {
		t.Errorf("rows = %v, want 125", got)
	}
	if got := m.sum("go_goroutines"); got != 12 {
		t.Errorf("unlabelled sample = %v, want 12", got)
	}
}

func TestCaughtUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		ends map[string]map[int32]int64
		want bool
	}{
		{"OK", map[string]map[int32]int64{"kv.changes": {0: 70, 1: 60, 2: 0}, "kv.conflicts": {0: 6}}, true},
		{"BehindOnePartition", map[string]map[int32]int64{"kv.changes": {0: 71, 1: 60}}, false},
		{"PartitionNeverCommitted", map[string]map[int32]int64{"kv.conflicts": {1: 3}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := caughtUp(mustMetrics(t, auditorExposition), tc.ends); got != tc.want {
				t.Errorf("caughtUp = %v, want %v", got, tc.want)
			}
		})
	}
}
