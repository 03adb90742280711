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
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/events"
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
// not), the topic was reset (ErrTopicReset: recreated, truncated, records
// deleted, a stored offset out of range; checked at start, on every
// assignment and every CheckInterval), or Postgres keeps failing.
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
	// the finding as its cause; the poll loop returns it.
	pctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)

	var static []kgo.Opt
	if p.cfg.InstanceID != "" {
		static = append(static, kgo.InstanceID(p.cfg.InstanceID))
	}
	cl, err := kgo.NewClient(append(static,
		kgo.SeedBrokers(p.cfg.Brokers...),
		kgo.WithLogger(changelog.Logger(p.log)),
		kgo.ConsumerGroup(p.cfg.Group),
		// A crashed projector's partitions move after 10 s, not the
		// default 45 s.
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.ConsumeTopics(p.cfg.Topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers move the stored offsets too, so that a
		// caught-up projection's offsets equal the last stable offsets.
		kgo.KeepControlRecords(),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		// Partitions without an offset in Postgres start at the beginning;
		// an offset out of range is fatal for the partition (reported by
		// PollRecords), never silently reset.
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.AdjustFetchOffsetsFn(func(ctx context.Context, assigned map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			return p.adjustOffsets(ctx, adm, fail, assigned)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
			p.log.Info("partitions revoked", "partitions", revoked[p.cfg.Topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			p.log.Warn("partitions lost", "partitions", lost[p.cfg.Topic])
		}),
		// Fetches return as soon as data arrives; the wait only bounds an
		// idle fetch.
		kgo.FetchMaxWait(100*time.Millisecond),
	)...)
	if err != nil {
		return fmt.Errorf("projector: kafka client: %w", err)
	}
	defer func() {
		cl.AllowRebalance()
		cl.Close() // leaves the group
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

	lastCommit := time.Now()
	pending := make(map[int32]int64)
	for {
		fetches := cl.PollRecords(pctx, p.cfg.MaxBatch)
		if pctx.Err() != nil || fetches.IsClientClosed() {
			p.commitGroup(cl, pending)
			if ctx.Err() == nil && pctx.Err() != nil {
				return context.Cause(pctx)
			}
			return nil
		}
		if err := p.fetchErrors(fetches); err != nil {
			return err
		}

		batch, poison := p.decode(fetches)
		if len(batch) > 0 {
			if err := p.apply(ctx, batch); err != nil {
				if ctx.Err() != nil {
					return nil // rolled back; the next run re-reads it
				}
				return err
			}
			for _, a := range batch {
				pending[a.Partition] = max(pending[a.Partition], a.Offset+1)
			}
		}
		if poison != nil {
			p.commitGroup(cl, pending)
			return poison
		}
		if time.Since(lastCommit) >= p.cfg.CommitInterval {
			p.commitGroup(cl, pending)
			lastCommit = time.Now()
		}
		cl.AllowRebalance()
	}
}

// waitTopic waits until the changes topic exists (the writer creates it)
// and checks it (checkTopic); a partition count mismatch or a reset is
// fatal at once.
func (p *Projector) waitTopic(ctx context.Context, adm *kadm.Client) error {
	backoff := 100 * time.Millisecond
	for {
		err := p.checkTopic(ctx, adm)
		if err == nil || fatal(err) || ctx.Err() != nil {
			return err
		}
		p.log.Warn("changes topic not available yet; retrying", "topic", p.cfg.Topic, "retry_in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// checkTopic checks the changes topic before joining the group: its
// partition count (changelog.Check), then that it is still the log the
// projection holds a prefix of (checkLog).
func (p *Projector) checkTopic(ctx context.Context, adm *kadm.Client) error {
	topics := changelog.Topics{Changes: p.cfg.Topic, Partitions: p.cfg.Partitions}
	if err := changelog.Check(ctx, adm, topics); err != nil {
		if errors.Is(err, changelog.ErrPartitionCount) {
			p.m.resets.WithLabelValues(reasonPartitionCount).Inc()
		}
		return fmt.Errorf("projector: %w", err)
	}
	return p.checkLog(ctx, adm)
}

// adjustOffsets replaces the group's offsets of newly assigned partitions
// with the next offsets stored in Postgres; partitions never applied start
// at the beginning of the log. It first checks the topic's identity and
// that each stored offset lies within its partition's log: a reset is
// passed to fail (which stops Run) and the assignment is refused.
func (p *Projector) adjustOffsets(ctx context.Context, adm *kadm.Client, fail context.CancelCauseFunc, assigned map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	stored, err := p.store.Offsets(ctx, p.cfg.Topic)
	if err != nil {
		p.log.Error("reading stored offsets failed; the group rejoins and retries", "err", err)
		return nil, err
	}
	err = p.checkIdentity(ctx, adm)
	if err == nil {
		err = p.checkRanges(ctx, adm, stored, slices.Collect(maps.Keys(assigned[p.cfg.Topic])))
	}
	if err != nil {
		if fatal(err) {
			fail(err)
		} else {
			p.log.Error("checking the changes topic on assignment failed; the group rejoins and retries", "err", err)
		}
		return nil, err
	}
	for topic, parts := range assigned {
		if topic != p.cfg.Topic {
			continue
		}
		from := make(map[int32]int64, len(parts))
		for part := range parts {
			if o, ok := stored[part]; ok {
				parts[part] = kgo.NewOffset().At(o)
				from[part] = o
			} else {
				parts[part] = kgo.NewOffset().AtStart()
				from[part] = 0
			}
		}
		p.log.Info("partitions assigned; resuming at the offsets stored in Postgres", "topic", topic, "offsets", from)
	}
	return assigned, nil
}

// fetchErrors returns an error for any fetch error that would make the
// projector skip or lose events. Group session errors are transient: the
// client rejoins by itself.
func (p *Projector) fetchErrors(fetches kgo.Fetches) error {
	var errs []error
	fetches.EachError(func(topic string, part int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		if _, ok := errors.AsType[*kgo.ErrGroupSession](err); ok {
			p.log.Warn("consumer group session failed; rejoining", "err", err)
			return
		}
		if errors.Is(err, kerr.OffsetOutOfRange) {
			errs = append(errs, p.reset(ErrTopicReset, reasonOutOfRange,
				fmt.Sprintf("partition %d: fetch: %v: the topic was truncated or recreated", part, err), "partition", part))
			return
		}
		p.log.Error("fetch failed; stopping", "topic", topic, "partition", part, "err", err)
		errs = append(errs, fmt.Errorf("projector: fetch %s/%d: %w", topic, part, err))
	})
	return errors.Join(errs...)
}

// decode turns the fetched records into events. A record that does not
// decode is a poison pill: it and the records after it in its partition
// are left out, and poison says where it is; the other partitions'
// records are kept.
func (p *Projector) decode(fetches kgo.Fetches) (batch []projection.Applied, poison error) {
	batch = make([]projection.Applied, 0, fetches.NumRecords())
	var bad map[int32]bool
	fetches.EachRecord(func(r *kgo.Record) {
		if bad[r.Partition] {
			return
		}
		if r.Attrs.IsControl() {
			batch = append(batch, projection.Applied{Partition: r.Partition, Offset: r.Offset, Marker: true})
			return
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
			return
		}
		batch = append(batch, projection.Applied{Partition: r.Partition, Offset: r.Offset, Event: e})
	})
	return batch, poison
}

// apply stores a batch in one transaction, retrying while Postgres is
// unavailable for up to maxRetry (rebalances wait meanwhile).
func (p *Projector) apply(ctx context.Context, batch []projection.Applied) error {
	const maxRetry = 30 * time.Second
	start := time.Now()
	backoff := 50 * time.Millisecond
	for {
		err := p.store.Apply(ctx, p.cfg.Topic, batch)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return err
		}
		if events.ErrorCode(err) != events.EUnavailable || time.Since(start) > maxRetry {
			p.log.Error("applying a batch failed; stopping", "records", len(batch), "err", err)
			return err
		}
		p.log.Warn("applying a batch failed; retrying", "records", len(batch), "backoff", backoff, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	now := time.Now()
	p.m.batchSize.Observe(float64(len(batch)))
	p.m.applyDuration.Observe(now.Sub(start).Seconds())
	var applied int
	for i := range batch {
		if !batch[i].Marker {
			applied++
		}
	}
	p.m.applied.Add(float64(applied))
	next := make(map[int32]int64)
	for i := range batch {
		a := &batch[i]
		if !a.Marker {
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
	return nil
}

// commitGroup commits the applied offsets to the Kafka group, for lag
// tooling only; a failure is logged and otherwise ignored.
func (p *Projector) commitGroup(cl *kgo.Client, pending map[int32]int64) {
	if len(pending) == 0 {
		return
	}
	offsets := map[string]map[int32]kgo.EpochOffset{p.cfg.Topic: {}}
	for _, part := range slices.Sorted(maps.Keys(pending)) {
		offsets[p.cfg.Topic][part] = kgo.EpochOffset{Epoch: -1, Offset: pending[part]}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err == nil {
			for _, t := range resp.Topics {
				for _, pt := range t.Partitions {
					if pt.ErrorCode != 0 && err == nil {
						err = fmt.Errorf("partition %d: error code %d", pt.Partition, pt.ErrorCode)
					}
				}
			}
		}
		if err != nil {
			p.log.Warn("committing offsets to the kafka group failed (postgres holds the offsets that count)", "err", err)
		}
	})
	clear(pending)
}
