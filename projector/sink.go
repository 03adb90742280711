package projector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/projection"
)

// sink is the projector as the changelog consumer's sink: each batch is
// one Postgres transaction that also stores the next offsets, and
// assigned partitions resume at the offsets stored there.
type sink struct {
	*Projector
	adm  *kadm.Client
	fail context.CancelCauseFunc // stops Run with a reset found on assignment
}

// Assigned returns the next offsets stored in Postgres for the newly
// assigned partitions; partitions never applied start at the beginning of
// the log. It first checks the topic's identity and that each stored
// offset lies within its partition's log: a reset is passed to fail (which
// stops Run) and the assignment is refused.
func (s *sink) Assigned(ctx context.Context, assigned map[string][]int32) (map[string]map[int32]kgo.Offset, error) {
	stored, err := s.store.Offsets(ctx, s.cfg.Topic)
	if err != nil {
		s.log.Error("reading stored offsets failed; the group rejoins and retries", "err", err)
		return nil, err
	}
	err = s.checkIdentity(ctx, s.adm)
	if err == nil {
		err = s.checkRanges(ctx, s.adm, stored, assigned[s.cfg.Topic])
	}
	if err != nil {
		if changelog.Fatal(err) {
			s.fail(err)
		} else {
			s.log.Error("checking the changes topic on assignment failed; the group rejoins and retries", "err", err)
		}
		return nil, err
	}
	parts := assigned[s.cfg.Topic]
	if len(parts) == 0 {
		return nil, nil
	}
	start := make(map[int32]kgo.Offset, len(parts))
	from := make(map[int32]int64, len(parts))
	for _, part := range parts {
		if o, ok := stored[part]; ok {
			start[part], from[part] = kgo.NewOffset().At(o), o
		} else {
			start[part], from[part] = kgo.NewOffset().AtStart(), 0
		}
	}
	s.log.Info("partitions assigned; resuming at the offsets stored in Postgres", "topic", s.cfg.Topic, "offsets", from)
	return map[string]map[int32]kgo.Offset{s.cfg.Topic: start}, nil
}

// Write applies the records in one transaction. A record that does not
// decode is a poison pill: the records before it are applied, it and the
// ones after it in its partition are not, and Write returns it.
func (s *sink) Write(ctx context.Context, recs []*kgo.Record) (changelog.Offsets, error) {
	batch, poison := s.decode(recs)
	if len(batch) == 0 {
		return nil, poison
	}
	next, err := s.apply(ctx, batch)
	if err != nil {
		return nil, err
	}
	return changelog.Offsets{s.cfg.Topic: next}, poison
}

// Committed logs a failed commit: the group's offsets are for lag tooling
// only.
func (s *sink) Committed(_ changelog.Offsets, err error) {
	if err != nil {
		s.log.Warn("committing offsets to the kafka group failed (postgres holds the offsets that count)", "err", err)
	}
}

// decode turns the fetched records into events. A record that does not
// decode is a poison pill: it and the records after it in its partition
// are left out, and poison says where it is; the other partitions'
// records are kept.
func (p *Projector) decode(recs []*kgo.Record) (batch []projection.Applied, poison error) {
	batch = make([]projection.Applied, 0, len(recs))
	var bad map[int32]bool
	for _, r := range recs {
		if bad[r.Partition] {
			continue
		}
		if r.Attrs.IsControl() {
			batch = append(batch, projection.Applied{Partition: r.Partition, Offset: r.Offset, Marker: true})
			continue
		}
		e, err := changelog.Event(r)
		if err != nil {
			p.log.Error("record does not decode; stopping the projector (poison pill)",
				"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
			if bad == nil {
				bad = make(map[int32]bool)
			}
			bad[r.Partition] = true
			poison = errors.Join(poison, fmt.Errorf("projector: poison pill at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err))
			continue
		}
		batch = append(batch, projection.Applied{Partition: r.Partition, Offset: r.Offset, Event: e})
	}
	return batch, poison
}

// apply stores a batch in one transaction, retrying while Postgres is
// unavailable for up to 30 s (rebalances wait meanwhile), and returns the
// next offset per partition it stored.
func (p *Projector) apply(ctx context.Context, batch []projection.Applied) (map[int32]int64, error) {
	start := time.Now()
	err := changelog.Retry{
		Base: 50 * time.Millisecond, Cap: 2 * time.Second, Max: 30 * time.Second,
		Retriable: func(err error) bool { return events.ErrorCode(err) == events.EUnavailable },
		OnRetry: func(err error, wait time.Duration) {
			p.log.Warn("applying a batch failed; retrying", "records", len(batch), "backoff", wait, "err", err)
		},
	}.Do(ctx, func(ctx context.Context) error { return p.store.Apply(ctx, p.cfg.Topic, batch) })
	if err != nil {
		if ctx.Err() == nil {
			p.log.Error("applying a batch failed; stopping", "records", len(batch), "err", err)
		}
		return nil, err
	}
	return p.count(batch, start), nil
}

// count counts an applied batch in the metrics and in Applied, and
// returns the next offset per partition.
func (p *Projector) count(batch []projection.Applied, start time.Time) map[int32]int64 {
	now := time.Now()
	p.m.batchSize.Observe(float64(len(batch)))
	p.m.applyDuration.Observe(now.Sub(start).Seconds())
	next := make(map[int32]int64)
	for i := range batch {
		a := &batch[i]
		if !a.Marker {
			p.m.applied.Inc()
			p.m.lag.Observe(now.Sub(a.Event.TS).Seconds())
		}
		next[a.Partition] = max(next[a.Partition], a.Offset+1)
	}
	p.mu.Lock()
	for part, o := range next {
		p.applied[part] = max(p.applied[part], o)
	}
	p.mu.Unlock()
	for part, o := range next {
		p.m.nextOffset.WithLabelValues(fmt.Sprint(part)).Set(float64(o))
	}
	return next
}
