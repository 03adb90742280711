package writer

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

func TestReady(t *testing.T) {
	newWriter := func(t *testing.T) *Writer {
		t.Helper()
		w, err := New(Config{
			Brokers: []string{"127.0.0.1:1"}, // never dialled
			Topics:  changelog.Topics{Changes: "c", Conflicts: "x", Partitions: 2},
		}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.admCl.Close)
		return w
	}
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
			w := newWriter(t)
			w.joined = tc.joined
			withPartitions(w, tc.parts...)
			if got := w.Ready(); got != tc.want {
				t.Fatalf("Ready() = %v; want %v", got, tc.want)
			}
		})
	}
	t.Run("ErrMembershipLost", func(t *testing.T) {
		w := newWriter(t)
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
		w, err := New(Config{
			Brokers:        b.Addrs,
			Topics:         b.Topics,
			InstanceID:     id,
			SessionTimeout: 6 * time.Second,
		}, store, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("writer %s: %v", id, err)
			}
		})
		ws = append(ws, w)
	}
	owners := func() (n int) {
		for _, w := range ws {
			n += len(w.owned())
		}
		return n
	}
	waitUntil(t, 30*time.Second, "both writers ready and the partition owned once", func() bool {
		return ws[0].Ready() && ws[1].Ready() && owners() == 1
	})
}

// waitUntil polls cond until it holds or d passed.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
