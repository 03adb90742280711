package audit_test

import (
	"testing"
	"time"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/testenv"
)

// BenchmarkIngest measures the auditor catching up on a backlog of b.N
// events (200 keys, one conflict per key) in an in-process broker:
// decode, hash, chain, insert into ClickHouse, commit.
func BenchmarkIngest(b *testing.B) {
	br := testenv.MustBroker(b, 12)
	s, _ := mustStore(b)
	keys := 200
	versions := max(b.N/keys, 1)
	h := synth("bench", keys, versions, time.Now().UTC())
	produce(b, br, h, false)
	b.ResetTimer()
	start := time.Now()
	a := runAuditor(b, br, s, audit.Config{Group: "bench"}, nil, nil)
	waitCaughtUp(b, br, a)
	b.StopTimer()
	rows := len(h.events) + len(h.conflicts)
	b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "rows/s")
}
