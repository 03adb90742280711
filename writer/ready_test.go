package writer

import (
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

func TestReady(t *testing.T) {
	t.Parallel()
	withPartitions := func(w *Writer, ready ...bool) {
		for i, r := range ready {
			p := newPartition(w, int32(i))
			p.ready = r
			w.parts[int32(i)] = p
		}
	}
	for _, tc := range []struct {
		name   string
		joined bool
		parts  []bool // readiness of each owned partition
		want   bool
	}{
		{"ErrNotJoined", false, nil, false},
		{"ErrNotJoinedWithPartitions", false, []bool{true}, false},
		{"OKJoinedOwningNothing", true, nil, true},
		{"OKEveryPartitionCaughtUp", true, []bool{true, true}, true},
		{"ErrAPartitionCatchingUp", true, []bool{true, false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := offlineWriter(t, Config{})
			w.joined = tc.joined
			withPartitions(w, tc.parts...)
			if got := w.Ready(); got != tc.want {
				t.Fatalf("Ready() = %v; want %v", got, tc.want)
			}
		})
	}
	t.Run("ErrMembershipLost", func(t *testing.T) {
		w := offlineWriter(t, Config{})
		w.joined = true
		if !w.Ready() {
			t.Fatal("a member owning nothing is not ready")
		}
		w.lose(nil)
		if w.Ready() {
			t.Fatal("ready after losing its group membership")
		}
	})
}

// TestReadyWithMoreWritersThanPartitions runs two writers on a topic of one
// partition: the one that owns nothing is ready too (it forwards).
func TestReadyWithMoreWritersThanPartitions(t *testing.T) {
	t.Parallel()
	b := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	var ws []*Writer
	for _, id := range []string{"ready-a", "ready-b"} {
		ws = append(ws, runWriter(t, b, store, Config{InstanceID: id}))
	}
	owners := func() (n int) {
		for _, w := range ws {
			n += len(w.owned())
		}
		return n
	}
	testenv.WaitFor(t, 30*time.Second, "both writers ready and the partition owned once", func() bool {
		return ws[0].Ready() && ws[1].Ready() && owners() == 1
	})
}

// TestAuditDeniedNeverBlocks: a denied write's audit record is queued
// only on a ready partition this writer owns whose queue is less than half
// full; otherwise it is dropped and counted, at once.
func TestAuditDeniedNeverBlocks(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t, Config{QueueDepth: 4, Topics: changelog.Topics{Changes: "c", Conflicts: "x", Partitions: 1}})
	key := mustKey(t, "tenant/a/project/b/k")
	outcomes := func() (out []float64) {
		for _, o := range []string{"queued", "not_owner", "dropped"} {
			var m dto.Metric
			if err := w.metrics.deniedAudits.WithLabelValues(o).Write(&m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m.GetCounter().GetValue())
		}
		return out
	}
	w.AuditDenied(key, contract.OpPut, "p", "")
	p := newPartition(w, 0)
	w.parts[0] = p
	w.AuditDenied(key, contract.OpPut, "p", "") // not ready
	p.ready = true
	for range 4 {
		w.AuditDenied(key, contract.OpDelete, "p", "r-1")
	}
	if got := fmt.Sprint(outcomes()); got != "[2 1 3]" || len(p.calls) != 2 {
		t.Fatalf("queued, not_owner, dropped = %s with %d queued calls; want [2 1 3] and 2", got, len(p.calls))
	}
	if r, _ := (<-p.calls).cmd.(*decide.KV); r == nil || !r.Denied || r.Op != contract.OpDelete || r.Principal != "p" || r.RequestID != "r-1" || r.Key != key {
		t.Fatalf("queued request %+v", r)
	}
}
