package e2e

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/projector"
)

// startProjector runs the projector in-process until ctx ends.
func startProjector(tb testing.TB, ctx context.Context, s *stack, log *slog.Logger, wg *sync.WaitGroup, mayStop bool) {
	tb.Helper()
	p, err := projector.New(projector.Config{
		Brokers:    s.broker.Addrs,
		Topic:      s.broker.Topics.Changes,
		Partitions: s.broker.Topics.Partitions,
	}, s.store, log, nil)
	if err != nil {
		tb.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := p.Run(ctx); err != nil {
			if !mayStop {
				tb.Errorf("projector: %v", err)
			}
		}
	}()
}

// waitProjected waits until the projection's stored offsets are past the
// last committed event of every partition.
func waitProjected(tb testing.TB, s *stack) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, ends := s.readLogEnds(ctx)
	waitFor(tb, 60*time.Second, "projection to hold every event of the log", func() bool {
		got, err := s.store.Offsets(ctx, s.broker.Topics.Changes)
		if err != nil {
			tb.Fatal(err)
		}
		for p, e := range ends {
			if got[p] < e {
				return false
			}
		}
		return true
	})
}
