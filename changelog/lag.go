package changelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// DefaultLagInterval is the default of LagWatch.Interval.
const DefaultLagInterval = 5 * time.Second

// LagWatch keeps an offset-lag gauge of a consumer group: per topic and
// partition, the log end offset (high watermark) minus the offset the
// group committed (the log start offset while it committed nothing). It
// reads both with the admin client, beside the consumer and never
// through it, so the gauge keeps rising while the consumer is stalled (a
// batch blocked on its database, a rebalance that does not end): a lag
// histogram observed per applied record records nothing then.
type LagWatch struct {
	Admin  *kadm.Client
	Group  string
	Topics []string
	// Gauge is labelled topic and partition.
	Gauge *prometheus.GaugeVec
	// Stored, when set, returns the next offsets the consumer stored
	// itself (the projector's, in Postgres): a partition's lag counts
	// from the greater of it and the group's commit, since a consumer
	// that commits to the group only every CommitInterval leaves its
	// latest batches uncommitted for up to one interval.
	Stored func() Offsets
	// Interval is how often the gauge is updated; DefaultLagInterval when
	// zero.
	Interval time.Duration
	Log      *slog.Logger
}

// NewLagGauge returns the gauge of a LagWatch, named name.
func NewLagGauge(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"topic", "partition"})
}

// Run updates the gauge at once and then every Interval until ctx ends.
// A failed update is logged (at most once per failure streak) and the
// gauge keeps its last values.
func (w LagWatch) Run(ctx context.Context) {
	every := w.Interval
	if every <= 0 {
		every = DefaultLagInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		err := w.Update(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil && w.Log != nil:
			w.Log.Warn("offset lag not updated", "group", w.Group, "err", err)
		case err == nil && failing && w.Log != nil:
			w.Log.Info("offset lag updated again", "group", w.Group)
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Update sets the gauge once: end offsets, start offsets and the group's
// commits are listed, and every partition with an end offset gets a
// value.
func (w LagWatch) Update(ctx context.Context) error {
	ends, err := w.Admin.ListEndOffsets(ctx, w.Topics...)
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	starts, err := w.Admin.ListStartOffsets(ctx, w.Topics...)
	if err != nil {
		return fmt.Errorf("list start offsets: %w", err)
	}
	commits, err := w.Admin.FetchOffsets(ctx, w.Group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		commits, err = nil, nil // the group has not committed yet
	}
	if err != nil {
		return fmt.Errorf("fetch the offsets of group %s: %w", w.Group, err)
	}
	var stored Offsets
	if w.Stored != nil {
		stored = w.Stored()
	}
	ends.Each(func(end kadm.ListedOffset) {
		if end.Err != nil {
			return
		}
		next := int64(0)
		if s, ok := starts.Lookup(end.Topic, end.Partition); ok && s.Err == nil {
			next = s.Offset
		}
		if c, ok := commits.Lookup(end.Topic, end.Partition); ok && c.Err == nil && c.At >= 0 {
			next = c.At
		}
		if o, ok := stored[end.Topic][end.Partition]; ok {
			next = max(next, o)
		}
		w.Gauge.WithLabelValues(end.Topic, strconv.Itoa(int(end.Partition))).Set(float64(max(0, end.Offset-next)))
	})
	return nil
}
