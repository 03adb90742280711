// Package projector consumes kv.changes and applies it to the Postgres
// projection, exactly once: each polled batch is one Postgres transaction
// that also stores the next offset per partition, and on assignment the
// consumer seeks to the offsets stored in Postgres, not to the group's.
package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/projection"
)

// Group is the consumer group of the projector. It is part of the API:
// tooling reads its lag, and the group's committed offsets follow the ones
// stored in Postgres (which are the truth).
const Group = "kv-projector"

// DefaultMaxBatch is the default limit of records applied in one
// transaction.
const DefaultMaxBatch = 5000

// Config configures a Projector.
type Config struct {
	Brokers []string
	// Topic is the changes topic; default changelog.DefaultChangesTopic.
	Topic string
	// Group is the consumer group; default Group.
	Group string
	// Partitions is the partition count the topic must have. A mismatch
	// stops the projector at start.
	Partitions int32
	// MaxBatch limits the records applied in one transaction; default
	// DefaultMaxBatch.
	MaxBatch int
	// CommitInterval is how often the applied offsets are also committed
	// to the Kafka group, for lag tooling; default one second. Postgres
	// stays the truth: the group's offsets are never read back.
	CommitInterval time.Duration
	// CheckInterval is how often a running projector re-checks that the
	// topic is still the log it folds (topic ID, partition count, stored
	// offsets within the log); default DefaultCheckInterval. The same
	// checks run at start and on every assignment.
	CheckInterval time.Duration
	// InstanceID makes the projector a static member of its group: a
	// restarted projector with the same id takes its partitions back at
	// once, and a killed one does not leave a member behind that keeps
	// the group rebalancing. Empty means dynamic membership.
	InstanceID string
}

// DefaultCheckInterval is the default of Config.CheckInterval.
const DefaultCheckInterval = 30 * time.Second

// Projector is the consumer loop. Run it once.
type Projector struct {
	cfg   Config
	store *projection.Store
	log   *slog.Logger
	m     *metrics

	mu      sync.Mutex
	applied map[int32]int64
}

// New checks cfg, fills its defaults and registers the projector's metrics
// on reg (nil: not registered).
func New(cfg Config, store *projection.Store, log *slog.Logger, reg prometheus.Registerer) (*Projector, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("projector: no brokers configured")
	}
	if cfg.Partitions <= 0 {
		return nil, fmt.Errorf("projector: partitions must be positive, got %d", cfg.Partitions)
	}
	if cfg.Topic == "" {
		cfg.Topic = changelog.DefaultChangesTopic
	}
	if cfg.Group == "" {
		cfg.Group = Group
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = time.Second
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("projector: %w", err)
	}
	return &Projector{
		cfg:     cfg,
		store:   store,
		log:     log.With("component", "projector"),
		m:       m,
		applied: make(map[int32]int64),
	}, nil
}

// Applied returns the next offset per partition that this projector has
// applied and committed to Postgres so far (Store.Offsets has those of
// every projector).
func (p *Projector) Applied() map[int32]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.applied)
}

// Run consumes until ctx is cancelled, then leaves the group and returns
// nil. It returns an error, after leaving the group, when it cannot go on
// without losing or skipping events: the topic has another partition count
// than configured or recorded (changelog.ErrPartitionCount), a record does
// not decode (a poison pill: the records before it are applied, it is
// not), the topic was reset (changelog.ErrTopicReset: recreated, truncated,
// records deleted, a stored offset out of range; checked at start, on
// every assignment and every CheckInterval), or Postgres keeps failing.
func (p *Projector) Run(ctx context.Context) error {
	// The checks' metadata must be fresh: kgo answers metadata requests
	// from a cache up to MetadataMinAge old (default 5s).
	admCl, err := kgo.NewClient(kgo.SeedBrokers(p.cfg.Brokers...), kgo.WithLogger(changelog.Logger(p.log)),
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("projector: kafka client: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	if err := p.waitTopic(ctx, adm); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		p.log.Error("changes topic check failed; not starting", "topic", p.cfg.Topic, "err", err)
		return err
	}

	// A reset found on an assignment or by the watcher cancels pctx with
	// the finding as its cause; the consumer stops and Run returns it.
	pctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	c, err := changelog.NewConsumer(changelog.ConsumerConfig{
		Brokers: p.cfg.Brokers, Topics: []string{p.cfg.Topic}, Group: p.cfg.Group, InstanceID: p.cfg.InstanceID,
		MaxBatch: p.cfg.MaxBatch, CommitInterval: p.cfg.CommitInterval, Log: p.log,
	}, &sink{Projector: p, adm: adm, fail: fail})
	if err != nil {
		return fmt.Errorf("projector: %w", err)
	}
	defer func() {
		c.Close() // leaves the group
		p.log.Info("projector stopped")
	}()
	p.log.Info("projector started", "brokers", p.cfg.Brokers, "topic", p.cfg.Topic, "group", p.cfg.Group, "partitions", p.cfg.Partitions)

	watched := make(chan struct{})
	go func() {
		defer close(watched)
		p.watch(pctx, adm, fail)
	}()
	defer func() {
		fail(nil)
		<-watched
	}()

	err = c.Run(pctx)
	if ctx.Err() == nil && pctx.Err() != nil {
		return context.Cause(pctx)
	}
	p.reportAll(err) // an offset out of range, found by a fetch
	return err
}

// waitTopic waits until the changes topic exists (the writer creates it)
// and checks it (checkTopic); a partition count mismatch or a reset is
// fatal at once.
func (p *Projector) waitTopic(ctx context.Context, adm *kadm.Client) error {
	return changelog.Retry{
		Base: 100 * time.Millisecond, Cap: 5 * time.Second,
		Retriable: func(err error) bool { return !changelog.Fatal(err) },
		OnRetry: func(err error, wait time.Duration) {
			p.log.Warn("changes topic not available yet; retrying", "topic", p.cfg.Topic, "retry_in", wait, "err", err)
		},
	}.Do(ctx, func(ctx context.Context) error { return p.checkTopic(ctx, adm) })
}

// checkTopic checks the changes topic before joining the group: its
// partition count (changelog.Check), then that it is still the log the
// projection holds a prefix of (checkLog).
func (p *Projector) checkTopic(ctx context.Context, adm *kadm.Client) error {
	topics := changelog.Topics{Changes: p.cfg.Topic, Partitions: p.cfg.Partitions}
	if err := changelog.Check(ctx, adm, topics); err != nil {
		if errors.Is(err, changelog.ErrPartitionCount) {
			p.m.resets.WithLabelValues(changelog.ReasonPartitionCount).Inc()
		}
		return fmt.Errorf("projector: %w", err)
	}
	return p.checkLog(ctx, adm)
}
