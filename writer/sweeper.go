package writer

import (
	"context"
	"log/slog"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/sweeper"
)

// SweeperPrincipal is the identity under which the TTL sweeper appends
// expire events (their principal and lastWriter).
const SweeperPrincipal = sweeper.Principal

// sweep runs the TTL sweeper (package sweeper) over the partitions this
// writer owns until ctx ends.
func (w *Writer) sweep(ctx context.Context) {
	cfg := sweeper.Config{Interval: w.cfg.SweepInterval, Batch: w.cfg.SweepBatch, Queued: w.cfg.MaxBatch,
		Seconds: w.metrics.sweepSeconds, Swept: w.metrics.swept}
	sweeper.New(cfg, w.proj, w.sweptPartitions).Run(ctx)
}

// sweptPartitions lists the partitions this writer owns.
func (w *Writer) sweptPartitions() []sweeper.Partition {
	w.mu.RLock()
	defer w.mu.RUnlock()
	parts := make([]sweeper.Partition, 0, len(w.parts))
	for _, p := range w.parts {
		parts = append(parts, swept{p})
	}
	return parts
}

// swept is a partition as the sweeper sees it: its overlay, read under
// its read lock while it is ready, and its queue.
type swept struct{ p *partition }

func (s swept) ID() int32         { return s.p.id }
func (s swept) Log() *slog.Logger { return s.p.log }

func (s swept) Entries(fn func(key string, st keystate.State)) bool {
	p := s.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.ready {
		return false
	}
	for k, e := range p.overlay {
		fn(k, e.state)
	}
	return true
}

// Items hands fn a copy of each item's element: the partition's
// goroutine changes an entry's items in place under the write lock
// (withItem).
func (s swept) Items(fn func(queue, member string, el *contract.Element)) bool {
	p := s.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.ready {
		return false
	}
	for k, e := range p.overlay {
		for m, it := range e.items {
			el := it.el
			fn(k, m, &el)
		}
	}
	return true
}

func (s swept) Submit(cmd decide.Command) (func(context.Context) error, error) {
	c := &call{cmd: cmd, done: make(chan answer, 1)}
	if err := s.p.submit(c); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case a := <-c.done:
			return a.err
		}
	}, nil
}
