package changelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eskv/eskv/internal/kafkaconf"
)

// Offsets are next offsets (one past the last record taken) per topic and
// partition.
type Offsets map[string]map[int32]int64

// merge raises o to the offsets of next.
func (o Offsets) merge(next Offsets) {
	for t, ps := range next {
		if o[t] == nil {
			o[t] = make(map[int32]int64, len(ps))
		}
		for p, off := range ps {
			o[t][p] = max(o[t][p], off)
		}
	}
}

// Sink stores what a Consumer polls. Write and Committed are called from
// the goroutine running Consumer.Run, Assigned and Revoked from the
// client's group management (while no Write runs: rebalances wait for the
// batch).
type Sink interface {
	// Assigned is called when partitions are assigned, before they are
	// fetched. It returns where to start the partitions it chooses (the
	// others start at the group's committed offset, or the log start); an
	// error refuses the assignment: the client rejoins and asks again.
	Assigned(ctx context.Context, assigned map[string][]int32) (map[string]map[int32]kgo.Offset, error)
	// Write stores one batch of records (in offset order per partition,
	// transaction markers included) and returns the next offsets it
	// stored, which the consumer then commits to the group. With an error
	// the offsets it returns are committed too, then Run returns the error.
	Write(ctx context.Context, recs []*kgo.Record) (Offsets, error)
	// Committed reports a commit of offsets to the group, and its error.
	Committed(offsets Offsets, err error)
	// Revoked is called when partitions are revoked or lost, after their
	// last Write: a sink that holds records of a partition back (the
	// projector keeps an unfinished Kafka transaction for the next batch)
	// drops them, since whoever is assigned the partition next reads it
	// from the stored offsets.
	Revoked(revoked map[string][]int32)
}

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	Brokers []string
	// Kafka is how the client reaches the brokers (TLS, SASL, metrics);
	// zero: plaintext. Role names the client and its metrics
	// (default "consumer").
	Kafka  kafkaconf.Conn
	Role   string
	Topics []string
	Group  string
	// InstanceID makes the consumer a static member of its group
	// (KIP-345): restarted with the same id, it takes its partitions back
	// at once instead of after the session timeout. Empty means dynamic.
	InstanceID string
	// MaxBatch limits the records of one Write.
	MaxBatch int
	// Linger is how long a batch gathers records once the first arrived;
	// zero: one poll per batch.
	Linger time.Duration
	// Pace spaces the batches of a busy consumer: once a batch held at
	// least PaceFrom records, the next one gathers records until Pace
	// after that batch was handed to the sink (or MaxBatch), so a sink
	// with a high cost per batch (a Postgres transaction and its commit)
	// is written at most about once per Pace under load, in larger
	// batches, while a lightly loaded consumer (smaller batches) writes
	// each batch as soon as it arrives. Zero: no pacing.
	Pace     time.Duration
	PaceFrom int
	// CommitInterval is how often the written offsets are committed; zero:
	// after every Write. An idle consumer commits its pending offsets
	// within one interval too (not only when the next batch arrives), so
	// the group's lag reaches zero. Offsets not committed yet are
	// committed when Run returns.
	CommitInterval time.Duration
	// ResetToStart starts a partition whose offset fell out of the log
	// at its start again (re-reading is harmless to an idempotent sink).
	// Otherwise an offset out of range stops Run with a ResetError.
	ResetToStart bool
	// Log receives the consumer's and the Kafka client's logs.
	Log *slog.Logger
	// Opts are further client options (fetch sizes, for example).
	Opts []kgo.Opt
}

// Consumer is the one consumer loop of the changelog (franz-go's
// goroutine_per_partition_consuming/manual_commit, in one goroutine): it
// polls read_committed with rebalances blocked while a batch is written,
// hands each batch to its Sink, and commits the offsets only after the
// sink stored them.
type Consumer struct {
	cfg  ConsumerConfig
	sink Sink
	cl   *kgo.Client

	// paceUntil is when the next batch may be handed to the sink at the
	// earliest (Pace); zero when the last batch was not a busy one.
	paceUntil time.Time
}

// NewConsumer creates the group client, which starts joining the group.
// Close it when done.
func NewConsumer(cfg ConsumerConfig, sink Sink) (*Consumer, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	c := &Consumer{cfg: cfg, sink: sink}
	reset := kgo.NoResetOffset()
	if cfg.ResetToStart {
		reset = kgo.NewOffset().AtStart()
	}
	log := cfg.Log
	opts := []kgo.Opt{
		kgo.WithLogger(Logger(log)),
		kgo.ConsumerGroup(cfg.Group),
		// A crashed consumer's partitions move after 10 s, not the
		// default 45 s.
		kgo.SessionTimeout(10 * time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers move the offsets too, so that a caught-up
		// consumer's offsets equal the last stable offsets.
		kgo.KeepControlRecords(),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		// Partitions without an offset start at the beginning.
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()),
		kgo.ConsumeResetOffset(reset),
		// Fetches return as soon as data arrives; the wait only bounds an
		// idle fetch.
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.AdjustFetchOffsetsFn(c.adjust),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			log.Info("partitions assigned", "partitions", assigned)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
			log.Info("partitions revoked", "partitions", revoked)
			sink.Revoked(revoked)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			log.Warn("partitions lost", "partitions", lost)
			sink.Revoked(lost)
		}),
	}
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	role := cfg.Role
	if role == "" {
		role = "consumer"
	}
	cl, err := cfg.Kafka.NewClient(role, cfg.Brokers, append(opts, cfg.Opts...)...)
	if err != nil {
		return nil, err
	}
	c.cl = cl
	return c, nil
}

// adjust moves newly assigned partitions to the offsets the sink chooses.
func (c *Consumer) adjust(ctx context.Context, assigned map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	parts := make(map[string][]int32, len(assigned))
	for t, ps := range assigned {
		parts[t] = make([]int32, 0, len(ps))
		for p := range ps {
			parts[t] = append(parts[t], p)
		}
	}
	start, err := c.sink.Assigned(ctx, parts)
	if err != nil {
		return nil, err
	}
	for t, ps := range start {
		if assigned[t] != nil {
			maps.Copy(assigned[t], ps)
		}
	}
	return assigned, nil
}

// Close allows a pending rebalance and closes the client, which leaves
// the group.
func (c *Consumer) Close() {
	c.cl.AllowRebalance()
	c.cl.Close()
}

// Run polls and writes until ctx ends, then commits what is written and
// returns nil. It returns an error when a fetch fails in a way that would
// skip records (an offset out of range without ResetToStart is a
// ResetError) or Write fails; group session errors are transient (the
// client rejoins by itself).
func (c *Consumer) Run(ctx context.Context) error {
	pending := Offsets{}
	defer c.commit(pending)
	last := time.Now()
	for {
		recs, done, err := c.poll(ctx, c.commitDue(pending, last))
		if done || err != nil {
			return err
		}
		if len(recs) > 0 {
			c.pace(len(recs))
			next, err := c.sink.Write(ctx, recs)
			pending.merge(next)
			if err != nil {
				if ctx.Err() != nil {
					return nil // not stored: the next run reads it again
				}
				return err
			}
		}
		// Also after an idle poll that ran into commitDue: the last batch
		// of a burst is committed without waiting for the next one. The
		// poll blocked rebalances, so the partitions are still ours.
		if len(pending) > 0 && time.Since(last) >= c.cfg.CommitInterval {
			c.commit(pending)
			last = time.Now()
		}
		c.cl.AllowRebalance()
	}
}

// commitDue returns when the pending offsets are to be committed (one
// CommitInterval after the last commit), or the zero time when nothing is
// pending: an idle poll waits no longer than that.
func (c *Consumer) commitDue(pending Offsets, last time.Time) time.Time {
	if len(pending) == 0 {
		return time.Time{}
	}
	return last.Add(c.cfg.CommitInterval)
}

// pace notes a batch of n records about to be written: when it is a busy
// one (PaceFrom records or more), the next batch gathers until Pace from
// now (ConsumerConfig.Pace).
func (c *Consumer) pace(n int) {
	c.paceUntil = time.Time{}
	if c.cfg.Pace > 0 && n >= c.cfg.PaceFrom {
		c.paceUntil = time.Now().Add(c.cfg.Pace)
	}
}

// poll returns the next batch: it waits for records until idleUntil (for
// ever when zero), then gathers more for up to Linger, and until the pace
// of a busy consumer allows the next batch (pace), or until MaxBatch; no
// records means the wait ran out. done reports that ctx ended or the
// client was closed.
func (c *Consumer) poll(ctx context.Context, idleUntil time.Time) (recs []*kgo.Record, done bool, err error) {
	var deadline time.Time
	for len(recs) < c.cfg.MaxBatch {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if len(recs) == 0 && !idleUntil.IsZero() {
			pctx, cancel = context.WithDeadline(ctx, idleUntil)
		}
		if len(recs) > 0 {
			if !time.Now().Before(deadline) {
				break
			}
			pctx, cancel = context.WithDeadline(ctx, deadline)
		}
		fetches := c.cl.PollRecords(pctx, c.cfg.MaxBatch-len(recs))
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil, true, nil
		}
		if err := c.fetchErrors(fetches); err != nil {
			return nil, false, err
		}
		if len(recs) == 0 {
			if fetches.NumRecords() == 0 {
				break // nothing but transient errors: let a rebalance in
			}
			deadline = time.Now().Add(c.cfg.Linger)
			if c.paceUntil.After(deadline) {
				deadline = c.paceUntil
			}
		}
		recs = append(recs, fetches.Records()...)
	}
	return recs, false, nil
}

// fetchErrors returns an error for any fetch error that would make the
// consumer skip or lose records.
func (c *Consumer) fetchErrors(fetches kgo.Fetches) error {
	var errs []error
	fetches.EachError(func(topic string, part int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrClientClosed):
		case isGroupSession(err):
			c.cfg.Log.Warn("consumer group session failed; rejoining", "err", err)
		case errors.Is(err, kerr.OffsetOutOfRange):
			errs = append(errs, NewResetError(topic, ReasonOutOfRange,
				fmt.Sprintf("partition %d: fetch: %v: the topic was truncated or recreated", part, err), "partition", part))
		default:
			c.cfg.Log.Error("fetch failed; stopping", "topic", topic, "partition", part, "err", err)
			errs = append(errs, fmt.Errorf("fetch %s/%d: %w", topic, part, err))
		}
	})
	return errors.Join(errs...)
}

func isGroupSession(err error) bool {
	_, ok := errors.AsType[*kgo.ErrGroupSession](err)
	return ok
}

// commit commits pending to the group and reports it to the sink; pending
// is cleared either way (a failed commit means records are read again,
// which the sinks tolerate).
func (c *Consumer) commit(pending Offsets) {
	if len(pending) == 0 {
		return
	}
	offsets := make(map[string]map[int32]kgo.EpochOffset, len(pending))
	for t, ps := range pending {
		offsets[t] = make(map[int32]kgo.EpochOffset, len(ps))
		for p, o := range ps {
			offsets[t][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cerr error
	c.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		cerr = err
		if err != nil {
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
					cerr = fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
				}
			}
		}
	})
	c.sink.Committed(maps.Clone(pending), cerr)
	clear(pending)
}
