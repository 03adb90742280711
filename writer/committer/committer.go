// Package committer appends the batches of a writer's partitions to
// Kafka in the transactions of one transactional producer, one
// transaction per round across the partitions that have a batch ready,
// each fenced by the writer group (fence.go), and keeps the sessions,
// the round's fence for readers and the read lease that follow from it.
// It knows partitions only by their number: what a batch holds, which
// records it brings and what its partition does after a failed round
// are its caller's (package writer).
package committer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/internal/kafkaconf"
)

// Committer appends every partition's batches in Kafka transactions of
// one transactional producer per writer process (Config.TxnID: the
// writer's <SharedTransactionalIDPrefix><InstanceID>), one transaction per round
// across the partitions that have a batch ready, as Kafka Streams' exactly-
// once v2 does: three to five broker requests per round instead of per
// batch.
//
// A round: wait for the first submission, take every submission queued
// meanwhile (a partition submits one batch and waits for the answer, so a
// round carries at most one batch per partition, and while a transaction
// is in flight the next round's batches queue up: group commit across
// partitions) and, up to RoundGather, the next batch of each partition
// the previous round answered (collect); then BeginTransaction,
// ProduceSync of all records, the second fence (fence.go: one
// TxnOffsetCommit naming each partition of the round, after an
// AddOffsetsToTxn sent beside the produce unless the brokers speak KIP-890
// part 2), EndTransaction(TryCommit); then answer every submission. Under KIP-890 part 2 (Kafka 4.0+ with
// transaction.version 2, and kfake) that is three requests per round:
// Produce, TxnOffsetCommit, EndTxn.
//
// Any error fails every submission of the round: their writes are
// answered 503, outcome unknown (a failed transaction may or may not have
// committed). The committer drops its producer without ending the
// transaction (never an EndTxn(abort) from a producer that saw an error:
// docs/architecture.md, "Where kfake differs from Apache Kafka", 1) and builds a new one under the same
// transactional id, whose InitProducerID bumps the epoch: the open
// transaction is completed or aborted and any produce of the old epoch
// still in flight is fenced. Each producer is a session; a partition
// whose round failed in session s reads the log only once session s+1
// began (Await), so no late produce of the old epoch can land behind the
// log end it reads. What a partition does after a failed round (start
// its ownership again, or resume) is the writer's; no round fails for
// its size when each batch is bounded in bytes below the topics'
// max.message.bytes (package batchbytes).
type Committer struct {
	cfg  Config
	log  *slog.Logger
	subs chan *submission
	// passes carries the partitions that the previous round answered
	// and that have nothing to submit (collect).
	passes chan int32
	done   chan struct{}

	mu sync.Mutex
	// session counts the producers that completed InitProducerID; 0
	// until the first did. next is closed when session advances.
	session uint64
	next    chan struct{}

	// prod is the current session's producer; only run touches it.
	prod *kgo.Client
	// busy is set while a round is under way or about to start (run took
	// a submission); readers wait on the next round's fence only then
	// (awaitFence). fenceWaiters are the readers waiting for the next
	// round's TxnOffsetCommit.
	busy         bool
	fenceWaiters []chan error

	// implicitAdd: the brokers admit the writer group to a transaction
	// with its TxnOffsetCommit (KIP-890 part 2), so a round sends no
	// AddOffsetsToTxn. Found at each session's start (implicitGroupAdd);
	// only run touches it.
	implicitAdd bool

	// lease is when the latest accepted fence was sent (Config.Clock;
	// 0: none): the writer confirms reads by it (LeaseSent).
	lease atomic.Int64
}

// Config is what the committer is built with.
type Config struct {
	// Kafka and Brokers reach the brokers (the producer's client role is
	// writer_producer).
	Kafka   kafkaconf.Conn
	Brokers []string
	// TxnID is the shared transactional id: a restart under the same id
	// aborts its predecessor's open transaction.
	TxnID              string
	TransactionTimeout time.Duration
	// Group is the writer group the fence presents Member to, and Topic
	// the topic whose records raise the group's offsets (kv.changes).
	Group string
	Topic string
	// Partitions is the topic's partition count: a round carries at most
	// one batch of each.
	Partitions int32
	// RoundGather bounds how long a round waits for the partitions the
	// previous round answered (collect); 0 or less: no wait.
	RoundGather time.Duration
	// ProducerLimit is the producer's batch limit of a topic
	// (kgo.ProducerBatchMaxBytesFn), asked at each session's start.
	ProducerLimit func(topic string) int32
	// Compression is the codec of the produce batches; the zero codec is
	// none (kafkaconf.DefaultCompression), never franz-go's default
	// (snappy), which consumers such as kafkajs cannot read.
	Compression kgo.CompressionCodec
	// Member is the writer group membership the fence presents now; ok
	// is false while the writer is not a member (ErrNotInGroup).
	Member func() (m Membership, ok bool)
	// Clock is the clock of read leases (nanoseconds); Leases turns
	// recording them (LeaseSent) on.
	Clock  func() int64
	Leases bool
	Log    *slog.Logger
	// Metrics are registered by the caller (Metrics.Collectors).
	Metrics *Metrics
}

// Batch is one partition's batch for the next round.
type Batch struct {
	Partition int32
	Records   []*kgo.Record
	// Offset is the writer group's offset for the partition before this
	// batch (its known end); the round raises it past the batch's last
	// record of Config.Topic.
	Offset int64
	// TopicID names Config.Topic in the fence (TxnOffsetCommit v6+).
	TopicID [16]byte
}

// submission is a batch waiting for its round.
type submission struct {
	Batch
	done chan Result // buffered: run never blocks on an answer
}

// Result is a round's outcome and the session it ran in.
type Result struct {
	Err     error
	Session uint64
}

// ErrStopped answers a submission that came after the writer stopped
// committing.
var ErrStopped = errors.New("the writer's committer stopped")

// errNoRound answers the readers waiting for a round's fence when the
// committer ran out of submissions: they confirm with the brokers.
var errNoRound = errors.New("no round under way")

// AwaitFence returns a channel that answers once a round's second fence
// (its TxnOffsetCommit, presenting this writer's group membership) sent
// after this call was accepted (nil) or not (an error), or nil when no
// round is under way: then none may follow, and the caller asks the
// brokers instead. The writer's read confirmation says what an accepted
// fence proves to a read.
func (c *Committer) AwaitFence() <-chan error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.busy {
		return nil
	}
	ch := make(chan error, 1)
	c.fenceWaiters = append(c.fenceWaiters, ch)
	return ch
}

// releaseFenceWaiters answers every waiting reader with err and marks the
// committer idle: readers ask the brokers until run takes the next
// submission.
func (c *Committer) releaseFenceWaiters(err error) {
	c.mu.Lock()
	readers := c.fenceWaiters
	c.fenceWaiters = nil
	c.busy = false
	c.mu.Unlock()
	answerFenceWaiters(readers, err)
}

func answerFenceWaiters(readers []chan error, err error) {
	for _, ch := range readers {
		ch <- err
	}
}

// New returns a committer; Run starts it.
func New(cfg Config) *Committer {
	return &Committer{
		cfg:    cfg,
		log:    cfg.Log.With("transactionalId", cfg.TxnID),
		subs:   make(chan *submission, cfg.Partitions),
		passes: make(chan int32, cfg.Partitions),
		done:   make(chan struct{}),
		next:   make(chan struct{}),
	}
}

// TxnID is the shared transactional id.
func (c *Committer) TxnID() string { return c.cfg.TxnID }

// Done is closed once Run returned.
func (c *Committer) Done() <-chan struct{} { return c.done }

// Commit appends b in the next round and returns its outcome and
// session. It waits for the round whatever happens to its caller: a
// round, once started, is finished (cancelling it would leave the
// outcome unknown). A partition submits one batch at a time.
func (c *Committer) Commit(b Batch) Result {
	s := &submission{Batch: b, done: make(chan Result, 1)}
	select {
	case c.subs <- s:
	case <-c.done:
		return Result{Err: ErrStopped}
	}
	select {
	case r := <-s.done:
		return r
	case <-c.done:
		// run answers every submission it took before it returns.
		select {
		case r := <-s.done:
			return r
		default:
			return Result{Err: ErrStopped}
		}
	}
}

// Await returns once a session after s began, or when ctx ends.
func (c *Committer) Await(ctx context.Context, s uint64) error {
	for {
		c.mu.Lock()
		cur, next := c.session, c.next
		c.mu.Unlock()
		if cur > s {
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return ErrStopped
		}
	}
}

// Run starts the first session and runs rounds until ctx ends. The writer
// ends ctx only after every partition stopped, so no round is under way
// then.
func (c *Committer) Run(ctx context.Context) {
	defer close(c.done)
	defer func() {
		if c.prod != nil {
			c.prod.Close()
		}
	}()
	if !c.renew(ctx) {
		return
	}
	defer c.releaseFenceWaiters(ErrStopped)
	round := make([]*submission, 0, cap(c.subs))
	// owed: the partitions the previous round answered, which the next
	// round waits for (collect).
	owed := make(map[int32]bool, cap(c.subs))
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var ok bool
		if round, ok = c.collect(ctx, round[:0], owed, timer); !ok {
			return
		}
		err := c.round(ctx, round)
		if fenced := (*FencedError)(nil); c.implicitAdd && errors.As(err, &fenced) && errors.Is(fenced.Err, kerr.InvalidTxnState) {
			// The coordinator did not admit the group itself after
			// all (a broker of the cluster is older than the one that
			// answered ApiVersions): admit it explicitly from now on.
			c.implicitAdd = false
			c.log.Warn("the group coordinator refused a transactional offset commit without AddOffsetsToTxn; sending AddOffsetsToTxn from now on", "err", err)
		}
		c.mu.Lock()
		session := c.session
		c.mu.Unlock()
		clear(owed)
		for _, s := range round {
			if err == nil {
				owed[s.Partition] = true
			}
			s.done <- Result{Err: err, Session: session}
		}
		if err != nil {
			c.releaseFenceWaiters(err)
			c.cfg.Metrics.TxnFailures.Inc()
			c.log.Warn("shared transaction failed; its partitions catch up again, the producer is replaced",
				"err", err, "partitions", len(round), "session", session)
			c.prod.Close() // unended: the next producer's InitProducerID aborts it
			c.prod = nil
			if !c.renew(ctx) {
				return
			}
		}
	}
}

// collect returns the next round's submissions, false when ctx ended.
//
// It waits for the partitions the previous round answered (owed) to
// submit their next batch or pass (nothing queued), up to
// Config.RoundGather, and takes every other submission queued meanwhile. Without
// that wait, rounds alternate between two halves of the busy partitions
// under load: a round would start as soon as the previous one ended, with
// the batches queued while it ran, before the partitions it answered have
// decided their next batch; these would then wait for that whole round,
// every batch waiting a round and a half on average, and each round
// carrying half the partitions. A partition takes microseconds to answer
// its callers and decide the batch queued meanwhile; a round takes a few
// broker round trips.
//
// While it may still start a round the committer stays busy: readers
// wait for that round's fence (AwaitFence). Once nothing is owed and
// nothing queued it is idle: the waiting readers ask the brokers instead,
// and so do later ones, until a submission comes.
func (c *Committer) collect(ctx context.Context, round []*submission, owed map[int32]bool, timer *time.Timer) ([]*submission, bool) {
	if len(owed) > 0 && c.cfg.RoundGather > 0 {
		start := time.Now()
		timer.Reset(c.cfg.RoundGather)
	gather:
		for len(owed) > 0 && len(round) < cap(round) {
			select {
			case s := <-c.subs:
				round = append(round, s)
				delete(owed, s.Partition)
			case id := <-c.passes:
				delete(owed, id)
			case <-timer.C:
				c.cfg.Metrics.GatherTimeouts.Inc()
				break gather
			case <-ctx.Done():
				timer.Stop()
				return round, false
			}
		}
		timer.Stop()
		c.cfg.Metrics.GatherSeconds.Observe(time.Since(start).Seconds())
	}
	clear(owed)
	if round = takeQueued(c.subs, round); len(round) > 0 {
		c.mu.Lock()
		c.busy = true // (idle after a failed round)
		c.mu.Unlock()
		return round, true
	}
	// No next round is certain: readers waiting for one ask the brokers
	// instead.
	c.releaseFenceWaiters(errNoRound)
	for {
		select {
		case <-ctx.Done():
			return round, false
		case <-c.passes: // late: nothing is owed now
		case s := <-c.subs:
			c.mu.Lock()
			c.busy = true
			c.mu.Unlock()
			return takeQueued(c.subs, append(round, s)), true
		}
	}
}

// takeQueued appends the submissions queued in subs to round, up to its
// capacity (one per partition), without waiting.
func takeQueued(subs <-chan *submission, round []*submission) []*submission {
	for len(round) < cap(round) {
		select {
		case s := <-subs:
			round = append(round, s)
		default:
			return round
		}
	}
	return round
}

// Pass tells the next round that partition id, answered by the previous
// one, has nothing to submit: it need not wait for it (collect).
func (c *Committer) Pass(id int32) {
	select {
	case c.passes <- id:
	default: // full: stale passes; the round's timer bounds the wait
	}
}

// renew builds the next session's producer and runs its InitProducerID,
// retrying until it succeeds or ctx ends (false).
func (c *Committer) renew(ctx context.Context) bool {
	cfg := c.cfg
	backoff := 100 * time.Millisecond
	for {
		prod, err := cfg.Kafka.NewClient("writer_producer", cfg.Brokers,
			kgo.TransactionalID(cfg.TxnID),
			kgo.TransactionTimeout(cfg.TransactionTimeout),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchMaxBytesFn(cfg.ProducerLimit),
			kgo.ProducerBatchCompression(cfg.Compression),
			kgo.WithLogger(changelog.Logger(c.log)),
		)
		if err == nil {
			// Bumps the epoch of the shared transactional id: the
			// previous session's (or a crashed predecessor's, under a
			// static InstanceID) open transaction is aborted.
			if _, _, err = prod.ProducerID(ctx); err == nil {
				c.prod = prod
				c.implicitAdd = implicitGroupAdd(ctx, prod, c.log)
				c.mu.Lock()
				c.session++
				close(c.next)
				c.next = make(chan struct{})
				c.mu.Unlock()
				return true
			}
			prod.Close()
		}
		c.log.Warn("start the shared transactional producer", "err", err, "backoff", backoff)
		c.failQueued(err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// failQueued answers the submissions queued while no producer is
// started: nothing of theirs was produced, and their partitions catch up
// again once the next session began. A partition that waited here would
// hold its revocation, and so the group, until the brokers answer again.
func (c *Committer) failQueued(err error) {
	c.mu.Lock()
	session := c.session
	c.mu.Unlock()
	for {
		select {
		case s := <-c.subs:
			s.done <- Result{Err: fmt.Errorf("no shared transactional producer: %w", err), Session: session}
		default:
			return
		}
	}
}

// round commits the submissions in one transaction, committed only when
// the second fence (fence.go) holds for every partition of it.
func (c *Committer) round(ctx context.Context, round []*submission) error {
	cfg := c.cfg
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.TransactionTimeout)
	defer cancel()
	prod := c.prod
	var recs []*kgo.Record
	for _, s := range round {
		recs = append(recs, s.Records...)
	}
	if err := prod.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// Produce, then the offset commit, then EndTxn: a transaction whose
	// offset commit the group accepted has its records on the log
	// already, so a new owner's settledEnd sees it open (fence.go). The
	// group's admission to the transaction (add) goes beside the produce.
	f := groupFence{txnID: cfg.TxnID, group: cfg.Group, topic: cfg.Topic, topicID: round[0].TopicID}
	added := func() error { return nil }
	if !c.implicitAdd {
		added = f.add(tctx, prod)
	}
	err := prod.ProduceSync(tctx, recs...).FirstErr()
	if addErr := added(); err == nil && addErr != nil {
		return addErr
	}
	if err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	offsets := make(map[int32]int64, len(round))
	for _, s := range round {
		o := max(offsets[s.Partition], s.Offset)
		for _, r := range s.Records {
			if r.Topic == cfg.Topic {
				o = max(o, r.Offset+1)
			}
		}
		offsets[s.Partition] = o
	}
	// Readers that arrived before this point are confirmed by this
	// round's fence (AwaitFence); later ones by the next round's.
	c.mu.Lock()
	readers := c.fenceWaiters
	c.fenceWaiters = nil
	c.mu.Unlock()
	m, ok := cfg.Member()
	if !ok {
		err := &FencedError{Membership: m, Err: ErrNotInGroup}
		answerFenceWaiters(readers, err)
		return err
	}
	sent := cfg.Clock()
	err = f.commitOffsets(tctx, prod, m, offsets)
	answerFenceWaiters(readers, err)
	if err != nil {
		return err
	}
	c.extendLease(sent)
	if err := prod.EndTransaction(tctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	cfg.Metrics.Transactions.Inc()
	cfg.Metrics.RoundPartitions.Observe(float64(len(round)))
	return nil
}

// extendLease records that a fence sent at sent (Config.Clock) was
// accepted. Only run's goroutine calls it, with growing times.
func (c *Committer) extendLease(sent int64) {
	if c.cfg.Leases {
		c.lease.Store(sent)
	}
}

// LeaseSent returns when the latest accepted fence was sent
// (Config.Clock), 0 when none was or leases are off: within the writer's
// read lease of it, a read of a partition ready since before it is
// confirmed without a wait.
func (c *Committer) LeaseSent() int64 {
	if c == nil {
		return 0
	}
	return c.lease.Load()
}

// Session is the number of sessions begun: a batch that failed in
// session s may read the log once Session() > s (Await).
func (c *Committer) Session() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// Queued is the number of batches waiting for the next round.
func (c *Committer) Queued() int { return len(c.subs) }

// FenceWaiters is the number of reads waiting for the next round's
// fence (AwaitFence).
func (c *Committer) FenceWaiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.fenceWaiters)
}
