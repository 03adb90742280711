package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/projection"
)

// RebuildConfig configures Rebuild.
type RebuildConfig struct {
	Brokers []string
	// Kafka is how the clients reach the brokers (TLS, SASL); zero:
	// plaintext.
	Kafka kafkaconf.Conn
	// Topic is the changes topic; default changelog.DefaultChangesTopic.
	Topic string
	// Partitions is the partition count the topic must have.
	Partitions int32
	// MaxBatch limits the events applied in one transaction; default
	// DefaultMaxBatch.
	MaxBatch int
	// Ends, when not nil, are the offsets to read each partition up to
	// (exclusive) instead of the last stable offsets at start; partitions
	// absent from it are not read. Give the stored offsets of a live
	// projection to fold the same prefix of the log as it did. Each must
	// lie within its partition's log, up to the last stable offset.
	Ends map[int32]int64
	// Parallel is how many partitions are read at once; default 4.
	Parallel int
}

// RebuildStats describes a finished rebuild.
type RebuildStats struct {
	// Events is the number of events read and applied.
	Events int64
	// Starts and Ends are the offsets read per partition: [start, end).
	Starts, Ends map[int32]int64
	// TopicID is the ID of the topic read.
	TopicID string
	Took    time.Duration
}

// Rebuild folds the changes topic into the projection of store, which
// should be empty (a fresh schema): every partition is read with
// read_committed from its log start to the last stable offset taken at
// start (or cfg.Ends) and applied with projection.Store.Apply. The stored
// offsets end at those ends and the topic's identity is recorded, so a
// projector can resume on the rebuilt schema. The compacted topic keeps
// only each key's latest event: kv_entries equals a projection that
// applied the whole log, kv_history holds fewer rows. A record that does
// not decode stops the rebuild (an error naming it). Into an empty
// projection, the secondary indexes and kv_fields are built once at the
// end (projection.DeferIndexes); a rebuild that fails before leaves the
// schema without them.
func Rebuild(ctx context.Context, cfg RebuildConfig, store *projection.Store, log *slog.Logger) (RebuildStats, error) {
	begin := time.Now()
	if err := cfg.fill(); err != nil {
		return RebuildStats{}, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "rebuild", "topic", cfg.Topic)

	cl, err := cfg.Kafka.NewClient("projector_rebuild", cfg.Brokers, kgo.WithLogger(changelog.Logger(log)))
	if err != nil {
		return RebuildStats{}, fmt.Errorf("rebuild: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	id, err := changelog.Describe(ctx, adm, cfg.Topic)
	if err != nil {
		return RebuildStats{}, fmt.Errorf("rebuild: %w", err)
	}
	if n := id.Partitions; n != cfg.Partitions {
		return RebuildStats{}, fmt.Errorf("rebuild: %w: %s has %d partitions, configured %d", changelog.ErrPartitionCount, cfg.Topic, n, cfg.Partitions)
	}
	starts, ends, err := rebuildRange(ctx, adm, cfg)
	if err != nil {
		return RebuildStats{}, err
	}
	log.Info("rebuilding", "partitions", id.Partitions, "from", starts, "to", ends)
	// Into an empty projection, the secondary indexes are built once at
	// the end instead of entry by entry (projection.DeferIndexes).
	deferred, err := store.DeferIndexes(ctx)
	if err != nil {
		return RebuildStats{}, fmt.Errorf("rebuild: %w", err)
	}
	folding := time.Now()
	n, err := (&rebuilder{cl: cl, store: store, cfg: cfg, log: log}).all(ctx, starts, ends)
	if err != nil {
		return RebuildStats{}, err
	}
	log.Info("folded", "events", n, "took", time.Since(folding))
	if deferred != nil {
		log.Info("building the deferred indexes", "indexes", deferred.Names, "events", n)
		restoring := time.Now()
		if err := deferred.Restore(ctx); err != nil {
			return RebuildStats{}, fmt.Errorf("rebuild: %w", err)
		}
		log.Info("restored", "took", time.Since(restoring), "steps", deferred.Took)
	}
	if _, err := store.ClaimTopic(ctx, projection.Topic{Name: cfg.Topic, ID: id.ID.String(), Partitions: id.Partitions}); err != nil {
		return RebuildStats{}, fmt.Errorf("rebuild: %w", err)
	}
	return RebuildStats{Events: n, Starts: starts, Ends: ends, TopicID: id.ID.String(), Took: time.Since(begin)}, nil
}

// fill checks cfg and fills its defaults.
func (cfg *RebuildConfig) fill() error {
	if len(cfg.Brokers) == 0 {
		return errors.New("rebuild: no brokers configured")
	}
	if cfg.Partitions <= 0 {
		return fmt.Errorf("rebuild: partitions must be positive, got %d", cfg.Partitions)
	}
	if cfg.Topic == "" {
		cfg.Topic = changelog.DefaultChangesTopic
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 4
	}
	return nil
}

// rebuilder is one rebuild's reader, store and settings.
type rebuilder struct {
	cl    *kgo.Client
	store *projection.Store
	cfg   RebuildConfig
	log   *slog.Logger
}

// all reads and applies the partitions in [starts, ends), cfg.Parallel at
// a time (partitions hold disjoint keys), and returns the number of
// events applied.
func (rb *rebuilder) all(ctx context.Context, starts, ends map[int32]int64) (int64, error) {
	cfg, log := rb.cfg, rb.log
	var total atomic.Int64
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan int32)
	var wg sync.WaitGroup
	for range cfg.Parallel {
		wg.Go(func() {
			for part := range work {
				nev, err := rb.partition(rctx, part, starts[part], ends[part])
				total.Add(nev)
				if err != nil {
					cancel(err)
					return
				}
				log.Debug("partition rebuilt", "partition", part, "events", nev, "from", starts[part], "to", ends[part])
			}
		})
	}
feed:
	for _, part := range slices.Sorted(maps.Keys(ends)) {
		select {
		case work <- part:
		case <-rctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if rctx.Err() != nil {
		return 0, context.Cause(rctx)
	}
	return total.Load(), nil
}

// rebuildRange returns, per partition to read, its log start and the end
// to read up to: the last stable offset, or cfg.Ends checked against the
// log.
func rebuildRange(ctx context.Context, adm *kadm.Client, cfg RebuildConfig) (starts, ends map[int32]int64, err error) {
	listed, err := adm.ListStartOffsets(ctx, cfg.Topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("rebuild: list start offsets of %s: %w", cfg.Topic, err)
	}
	lsos, err := adm.ListCommittedOffsets(ctx, cfg.Topic)
	if err == nil {
		err = lsos.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("rebuild: last stable offsets of %s: %w", cfg.Topic, err)
	}
	starts, ends = make(map[int32]int64), make(map[int32]int64)
	for part := range cfg.Partitions {
		st, ok1 := listed.Lookup(cfg.Topic, part)
		lso, ok2 := lsos.Lookup(cfg.Topic, part)
		if !ok1 || !ok2 {
			return nil, nil, fmt.Errorf("rebuild: offsets of %s/%d not listed", cfg.Topic, part)
		}
		end := lso.Offset
		if cfg.Ends != nil {
			e, ok := cfg.Ends[part]
			if !ok {
				continue
			}
			if e > lso.Offset {
				return nil, nil, fmt.Errorf("rebuild: %w: %s/%d: end %d is past the last stable offset %d (log %d..%d)",
					changelog.ErrTopicReset, cfg.Topic, part, e, lso.Offset, st.Offset, lso.Offset)
			}
			if e < st.Offset {
				return nil, nil, fmt.Errorf("rebuild: %w: %s/%d: end %d is before the log start %d: the records up to it were deleted",
					changelog.ErrTopicReset, cfg.Topic, part, e, st.Offset)
			}
			end = e
		}
		starts[part], ends[part] = st.Offset, end
	}
	return starts, ends, nil
}

// partition reads partition part in [from, end) and applies it in
// batches; a final marker moves the stored offset to end.
func (rb *rebuilder) partition(ctx context.Context, part int32, from, end int64) (int64, error) {
	cl, store, cfg := rb.cl, rb.store, rb.cfg
	var n int64
	batch := make([]projection.Applied, 0, min(cfg.MaxBatch, 1024))
	flush := func() error {
		if err := store.Load(ctx, cfg.Topic, batch); err != nil {
			return fmt.Errorf("rebuild: apply %s/%d: %w", cfg.Topic, part, err)
		}
		batch = batch[:0]
		return nil
	}
	var fnErr error
	err := changelog.ReadCommitted(ctx, cl, changelog.Range{Topic: cfg.Topic, Partition: part, From: from, End: end}, func(r *kgo.Record) error {
		e, raw, err := changelog.EventVerbatim(r)
		if err != nil {
			fnErr = fmt.Errorf("rebuild: record does not decode (poison pill): %w", err)
			return fnErr
		}
		batch = append(batch, projection.Applied{Partition: part, Offset: r.Offset, Event: e, Raw: raw})
		n++
		if len(batch) >= cfg.MaxBatch {
			fnErr = flush()
		}
		return fnErr
	})
	if fnErr != nil {
		return n, fnErr
	}
	if err != nil {
		return n, fmt.Errorf("rebuild: read %s/%d: %w", cfg.Topic, part, err)
	}
	if end > 0 {
		batch = append(batch, projection.Applied{Partition: part, Offset: end - 1, Marker: true})
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return n, err
		}
	}
	return n, nil
}
