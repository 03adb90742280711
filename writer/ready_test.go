package writer

import (
	"testing"
	"time"

	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

func TestReady(t *testing.T) {
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
