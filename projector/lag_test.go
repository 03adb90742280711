package projector_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
)

// TestOffsetLagWhileStalled: eskv_projector_offset_lag is the log end
// offset minus the group's committed offset per partition: 0 once the
// projector caught up; while the projector is stalled (Postgres holds
// its tables locked, so a batch waits) it rises by exactly the records
// produced meanwhile, and again with every further write; once the stall
// ends it falls back to 0.
func TestOffsetLagWhileStalled(t *testing.T) {
	t.Parallel()
	b, pg, s, prod := mustSetup(t, partitions)
	f := newFold(7, 8, 10)
	r := start(t, b, s, projector.Config{LagInterval: 20 * time.Millisecond, CommitInterval: 20 * time.Millisecond})
	produce(t, prod, f, 100, 10)
	testenv.WaitProjected(t, runTimeout, s, b.Topics.Changes, prod.Committed(t))
	zero := map[int32]int64{}
	for p := range partitions {
		zero[int32(p)] = 0
	}
	waitLag(t, r.reg, b.Topics.Changes, zero, "0 once caught up")
	before := testenv.EndOffsets(context.Background(), t, prod.Client, b.Topics.Changes)

	ctx := context.Background()
	release := pg.Lock(t, "projector_offsets", "kv_entries")
	for round := range 2 {
		produce(t, prod, f, 40, 10)
		after := testenv.EndOffsets(ctx, t, prod.Client, b.Topics.Changes)
		want := map[int32]int64{}
		for p, end := range after {
			want[p] = end - before[p]
		}
		waitLag(t, r.reg, b.Topics.Changes, want, fmt.Sprintf("the records produced while stalled (round %d)", round))
	}
	release()
	testenv.WaitProjected(t, runTimeout, s, b.Topics.Changes, prod.Committed(t))
	waitLag(t, r.reg, b.Topics.Changes, zero, "0 after the stall")
}

// waitLag waits until eskv_projector_offset_lag of topic equals want for
// every partition.
func waitLag(t *testing.T, reg *prometheus.Registry, topic string, want map[int32]int64, what string) {
	t.Helper()
	var got map[int32]int64
	testenv.WaitFor(t, runTimeout, "offset lag "+what, func() bool {
		got = lagOf(t, reg, "eskv_projector_offset_lag", topic)
		if len(got) != len(want) {
			return false
		}
		for p, n := range want {
			if got[p] != n {
				return false
			}
		}
		return true
	})
}

// lagOf returns the gauge name per partition of topic.
func lagOf(t *testing.T, reg *prometheus.Registry, name, topic string) map[int32]int64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var tp string
			var p int
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "topic":
					tp = l.GetValue()
				case "partition":
					p, _ = strconv.Atoi(l.GetValue())
				}
			}
			if tp == topic {
				out[int32(p)] = int64(m.GetGauge().GetValue())
			}
		}
	}
	return out
}
