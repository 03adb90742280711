// Package sweeper is the writer's TTL sweeper: every interval it lists,
// for each partition the writer owns, the entries past their expiry, the
// in-flight queue items past their visibility deadline and the items
// past their own TTL, and submits one expire, qrequeue or qexpire per
// due thing through the partition's queue, decided like any write
// against the current state, so a write that won the race is kept.
// It sees a partition only through Partition (its unprojected overlay
// and its queue) and the projection through Projection.
package sweeper

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
)

// Principal is the identity under which the sweeper appends expire
// events (their principal and lastWriter).
const Principal = "eskv-sweeper"

// Partition is one partition the writer owns, as the sweeper sees it.
type Partition interface {
	// ID is the partition's number.
	ID() int32
	// Log is the partition's logger.
	Log() *slog.Logger
	// Entries calls fn, under the partition's read lock, with the key
	// and state of each entry its overlay holds (events the projection
	// may not hold yet); false, without calling fn, when the partition
	// is not ready.
	Entries(fn func(key string, s keystate.State)) bool
	// Items calls fn, under the same lock, with each queue item its
	// overlay holds; false when the partition is not ready.
	Items(fn func(queue, member string, el *contract.Element)) bool
	// Submit queues cmd in the partition, or refuses it at once; wait
	// waits for its answer (ctx's error when ctx ends first).
	Submit(cmd decide.Command) (wait func(ctx context.Context) error, err error)
}

// Projection is what the sweeper reads of the projection: its work
// lists, which the overlay may know better.
type Projection interface {
	Expired(ctx context.Context, p int32, now time.Time, limit int) ([]projection.Expiring, error)
	DueItems(ctx context.Context, p int32, now time.Time, limit int) ([]projection.DueItem, error)
	ExpiredItems(ctx context.Context, p int32, now time.Time, limit int) ([]projection.DueItem, error)
}

// Config is how often the sweeper looks (Interval; negative: never),
// how many things it lists per round of a partition at most (Batch), how
// many it has queued at once at most (Queued: the writer's batch, so the
// partition's queue never overflows), and where it counts.
type Config struct {
	Interval time.Duration
	Batch    int
	Queued   int
	// Seconds observes the time of one TTL sweep round of a partition
	// that found expired entries; Swept counts by outcome.
	Seconds prometheus.Observer
	Swept   *prometheus.CounterVec
}

// Sweeper sweeps the partitions Parts lists.
type Sweeper struct {
	cfg   Config
	proj  Projection
	parts func() []Partition
}

// New is the sweeper of the partitions parts lists, at each round.
func New(cfg Config, proj Projection, parts func() []Partition) *Sweeper {
	return &Sweeper{cfg: cfg, proj: proj, parts: parts}
}

// Run sweeps until ctx ends: every Interval, each partition listed
// expires its entries past their expiry, and returns its queues'
// in-flight items past their visibility deadline to their queues
// (requeue), and removes the items whose own TTL passed (qexpire). Reads
// hide such entries at once; the expire event makes the removal a fact
// in the log (for subscribers and the audit trail).
func (s *Sweeper) Run(ctx context.Context) {
	if s.cfg.Interval < 0 {
		return
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, p := range s.parts() {
			s.Round(ctx, p)
		}
	}
}

// Round is one round of partition p: its entries, then its items.
func (s *Sweeper) Round(ctx context.Context, p Partition) {
	if err := s.sweep(ctx, p); err != nil && ctx.Err() == nil {
		p.Log().Warn("TTL sweep incomplete; the next round goes on", "err", err)
	}
	if err := s.requeue(ctx, p); err != nil && ctx.Err() == nil {
		p.Log().Warn("queue requeue sweep incomplete; the next round goes on", "err", err)
	}
	if err := s.expireItems(ctx, p); err != nil && ctx.Err() == nil {
		p.Log().Warn("queue item expiry sweep incomplete; the next round goes on", "err", err)
	}
}
