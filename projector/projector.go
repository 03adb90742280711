// Package projector consumes kv.changes and applies it to the Postgres
// projection, exactly once: each polled batch, cut at the last complete
// Kafka transaction of each partition (txn.go), is one Postgres
// transaction that also stores the next offset per partition, and on
// assignment the consumer seeks to the offsets stored in Postgres, not to
// the group's.
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
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/projection"
)

// Group is the consumer group of the projector. It is part of the API:
// tooling reads its lag, and the group's committed offsets follow the ones
// stored in Postgres (which are the truth).
const Group = "kv-projector"

// DefaultMaxBatch is the default limit of records applied in one
// transaction.
const DefaultMaxBatch = 5000

// DefaultPace and DefaultPaceFrom space a busy projector's applies
// (Config.Pace): under figure 18a's load, 12 events per apply cost
// Postgres 86 µs of CPU per event, 48 events 50 µs (BenchmarkApplyCAS,
// 2026-11-24).
const (
	DefaultPace     = 10 * time.Millisecond
	DefaultPaceFrom = 8
)

// Config configures a Projector.
type Config struct {
	Brokers []string
	// Kafka is how the clients reach the brokers (TLS, SASL); zero:
	// plaintext. Their metrics go to New's registry.
	Kafka kafkaconf.Conn
	// Topic is the changes topic; default changelog.DefaultChangesTopic.
	Topic string
	// Group is the consumer group; default Group.
	Group string
	// Partitions is the partition count the topic must have. A mismatch
	// stops the projector at start.
	Partitions int32
	// MaxBatch limits the records polled for one batch; default
	// DefaultMaxBatch. A Kafka transaction is never split over two
	// batches, so one applied transaction can exceed it (by the records of
	// the transaction the poll ended in).
	MaxBatch int
	// Pace spaces the applies of a busy projector: after an apply of at
	// least PaceFrom records, the next one gathers what arrives until
	// Pace after it began (changelog.ConsumerConfig.Pace). Each apply
	// costs Postgres a transaction, its commit and two statements'
	// fixed work whatever its size, so fewer, larger applies cost less
	// CPU per event; a lightly loaded projector applies each batch at
	// once. Default DefaultPace; negative: no pacing.
	Pace time.Duration
	// PaceFrom is the batch size (records, transaction markers included)
	// from which the projector counts as busy; default DefaultPaceFrom.
	PaceFrom int
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
	// Retention is how much of each key's history kv_history keeps
	// (ESKV_HISTORY_RETENTION, ParseRetention); the zero value keeps
	// everything. RetentionInterval is how often it runs; default
	// DefaultRetentionInterval.
	Retention         projection.Retention
	RetentionInterval time.Duration
	// LagInterval is how often eskv_projector_offset_lag is updated;
	// default changelog.DefaultLagInterval.
	LagInterval time.Duration
	// Opts are further options of the consumer's Kafka client (fetch
	// sizes, for example).
	Opts []kgo.Opt
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
	// ownedParts are the partitions assigned to this projector (it
	// builds their field indexes: backfill.go).
	ownedParts map[int32]bool
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
	if cfg.Pace == 0 {
		cfg.Pace = DefaultPace
	}
	if cfg.PaceFrom <= 0 {
		cfg.PaceFrom = DefaultPaceFrom
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	if cfg.RetentionInterval <= 0 {
		cfg.RetentionInterval = DefaultRetentionInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Kafka = cfg.Kafka.WithMetrics(reg)
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("projector: %w", err)
	}
	return &Projector{
		cfg:        cfg,
		store:      store,
		log:        log.With("component", "projector"),
		m:          m,
		applied:    make(map[int32]int64),
		ownedParts: make(map[int32]bool),
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
	admCl, err := p.cfg.Kafka.NewClient("projector_admin", p.cfg.Brokers, kgo.WithLogger(changelog.Logger(p.log)),
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("projector: %w", err)
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
		Brokers: p.cfg.Brokers, Kafka: p.cfg.Kafka, Role: "projector", Topics: []string{p.cfg.Topic}, Group: p.cfg.Group, InstanceID: p.cfg.InstanceID,
		MaxBatch: p.cfg.MaxBatch, Pace: max(p.cfg.Pace, 0), PaceFrom: p.cfg.PaceFrom,
		CommitInterval: p.cfg.CommitInterval, Log: p.log, Opts: p.cfg.Opts,
	}, &sink{Projector: p, adm: adm, fail: fail, tail: make(map[int32][]*kgo.Record)})
	if err != nil {
		return fmt.Errorf("projector: %w", err)
	}
	defer func() {
		c.Close() // leaves the group
		p.log.Info("projector stopped")
	}()
	p.log.Info("projector started", "brokers", p.cfg.Brokers, "topic", p.cfg.Topic, "group", p.cfg.Group, "partitions", p.cfg.Partitions)

	// The topic watcher, the lag gauge, the history retention and the
	// building of field indexes run beside the consumer, until Run
	// returns.
	lag := changelog.LagWatch{Admin: adm, Group: p.cfg.Group, Topics: []string{p.cfg.Topic}, Gauge: p.m.offsetLag, Interval: p.cfg.LagInterval, Log: p.log,
		Stored: func() changelog.Offsets { return changelog.Offsets{p.cfg.Topic: p.Applied()} }}
	var beside sync.WaitGroup
	beside.Go(func() { p.watch(pctx, adm, fail) })
	beside.Go(func() { lag.Run(pctx) })
	beside.Go(func() { p.retain(pctx) })
	beside.Go(func() { p.backfill(pctx) })
	defer func() {
		fail(nil)
		beside.Wait()
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
		// A refused TLS or SASL setting stops the start at once; later,
		// a refusal is the group's to retry (a broker restarting).
		Retriable: func(err error) bool { return !changelog.Fatal(err) && !kafkaconf.Refused(err) },
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

// sink is the projector as the changelog consumer's sink: each batch is
// one Postgres transaction that also stores the next offsets, and
// assigned partitions resume at the offsets stored there.
type sink struct {
	*Projector
	adm  *kadm.Client
	fail context.CancelCauseFunc // stops Run with a reset found on assignment

	mu sync.Mutex
	// tail holds per partition the records after its last complete Kafka
	// transaction, not applied yet (see take).
	tail map[int32][]*kgo.Record
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
	s.dropTails(parts) // reading resumes at the stored offsets
	start := make(map[int32]kgo.Offset, len(parts))
	from := make(map[int32]int64, len(parts))
	for _, part := range parts {
		if o, ok := stored[part]; ok {
			start[part], from[part] = kgo.NewOffset().At(o), o
		} else {
			start[part], from[part] = kgo.NewOffset().AtStart(), 0
		}
	}
	s.own(parts, true)
	s.log.Info("partitions assigned; resuming at the offsets stored in Postgres", "topic", s.cfg.Topic, "offsets", from)
	return map[string]map[int32]kgo.Offset{s.cfg.Topic: start}, nil
}

// Write applies, in one transaction, every partition's records up to its
// last complete Kafka transaction, the tail carried from the previous
// batch first, and carries what follows (see gather and take). A record
// that does not decode is a poison pill: the transactions before its own
// are applied, the rest of its partition is not, and Write returns it.
func (s *sink) Write(ctx context.Context, recs []*kgo.Record) (changelog.Offsets, error) {
	batch, poison := s.gather(recs)
	if len(batch) == 0 {
		return nil, poison
	}
	next, err := s.apply(ctx, batch)
	if err != nil {
		return nil, err // Run stops, and with it this sink: a next Run reads from the stored offsets
	}
	return changelog.Offsets{s.cfg.Topic: next}, poison
}

// gather returns what to apply of recs and the tails carried from the last
// batch (Projector.take per partition), and keeps the new tails.
func (s *sink) gather(recs []*kgo.Record) (batch []projection.Applied, poison error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := make(map[int32][]*kgo.Record, len(s.tail))
	for part, tail := range s.tail {
		parts[part] = tail
	}
	for _, r := range recs {
		parts[r.Partition] = append(parts[r.Partition], r)
	}
	clear(s.tail)
	total := 0
	for _, rs := range parts {
		total += len(rs)
	}
	batch = make([]projection.Applied, 0, total)
	carried := 0
	for _, part := range slices.Sorted(maps.Keys(parts)) {
		rs := parts[part]
		from := len(batch)
		var carry []*kgo.Record
		var err error
		batch, carry, err = s.takeInto(batch, rs)
		s.checkTxns(rs, batch[from:])
		if len(carry) > 0 {
			s.tail[part] = carry
			carried += len(carry)
		}
		poison = errors.Join(poison, err)
	}
	s.m.carried.Set(float64(carried))
	return batch, poison
}

// Revoked drops the tails of partitions this projector no longer owns: a
// new owner, or this one assigned them again, reads them from the offsets
// stored in Postgres.
func (s *sink) Revoked(revoked map[string][]int32) {
	s.dropTails(revoked[s.cfg.Topic])
	s.own(revoked[s.cfg.Topic], false)
}

func (s *sink) dropTails(parts []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, part := range parts {
		delete(s.tail, part)
	}
}

// checkTxns counts and logs the eskv transactions that a Kafka transaction
// of batch (take's result for recs) does not hold whole. They are applied
// as they are: stopping would stall the partition for good.
func (p *Projector) checkTxns(recs []*kgo.Record, batch []projection.Applied) {
	for _, g := range incompleteTxns(recs, batch) {
		p.m.txnIncomplete.Inc()
		p.log.Warn("an eskv transaction is not whole in its Kafka transaction; applied as it is "+
			"(a writer bug, or compaction removed its superseded events)",
			"topic", recs[0].Topic, "partition", recs[0].Partition, "txn_id", g.ID,
			"first_offset", g.First, "last_offset", g.Last, "events", g.Seen, "txn_size", g.Size)
	}
}

// Committed logs a failed commit: the group's offsets are for lag tooling
// only.
func (s *sink) Committed(_ changelog.Offsets, err error) {
	if err != nil {
		s.log.Warn("committing offsets to the kafka group failed (postgres holds the offsets that count)", "err", err)
	}
}

// apply stores a batch in one transaction, retrying while Postgres is
// unavailable for up to 30 s (rebalances wait meanwhile), and returns the
// next offset per partition it stored.
func (p *Projector) apply(ctx context.Context, batch []projection.Applied) (map[int32]int64, error) {
	start := time.Now()
	err := changelog.Retry{
		Base: 50 * time.Millisecond, Cap: 2 * time.Second, Max: 30 * time.Second,
		Retriable: func(err error) bool { return contract.ErrorCode(err) == contract.EUnavailable },
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
	applied := 0
	for i := range batch {
		a := &batch[i]
		if !a.Marker {
			applied++
			p.m.lag.Observe(now.Sub(a.Event.TS).Seconds())
		}
		next[a.Partition] = max(next[a.Partition], a.Offset+1)
	}
	p.m.applied.Add(float64(applied))
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
