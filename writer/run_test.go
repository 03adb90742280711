package writer

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

var discard = slog.New(slog.DiscardHandler)

// offlineWriter is a Writer that never dials its broker, for tests of its
// state; cfg's Brokers and Topics default to an unreachable address and
// topics of two partitions.
func offlineWriter(tb testing.TB, cfg Config) *Writer {
	tb.Helper()
	if cfg.Brokers == nil {
		cfg.Brokers = []string{"127.0.0.1:1"} // never dialled
	}
	if cfg.Topics.Partitions == 0 {
		cfg.Topics = changelog.Topics{Changes: "c", Conflicts: "x", Partitions: 2}
	}
	w, err := New(cfg, nil, discard, prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.admCl.Close)
	return w
}

// runWriter runs a Writer with cfg on b's topics and store until the test
// ends. cfg's SessionTimeout defaults to kfake's minimum, 6s.
func runWriter(tb testing.TB, b *testenv.Broker, store *projection.Store, cfg Config) *Writer {
	tb.Helper()
	w, _ := startWriter(tb, b, store, cfg)
	return w
}

// startWriter is runWriter, also returning the run, so a test can stop
// the writer before its end (to move its partitions to another).
func startWriter(tb testing.TB, b *testenv.Broker, store *projection.Store, cfg Config) (*Writer, *testenv.Running) {
	tb.Helper()
	cfg.Brokers, cfg.Topics = b.Addrs, b.Topics
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 6 * time.Second
	}
	w, err := New(cfg, store, discard, prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	return w, testenv.RunUntilCleanup(tb, "writer "+cfg.InstanceID, w.Run)
}
