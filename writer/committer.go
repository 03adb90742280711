package writer

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
)

// The committer appends every partition's batches in Kafka transactions of
// one transactional producer per writer process (transactional.id
// <SharedTransactionalIDPrefix><InstanceID>), one transaction per round
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
// began (await), so no late produce of the old epoch can land behind the
// log end it reads. After a fencing error (fencedRound: the group
// refused this writer, or the producer was fenced) the partitions of the
// round start their ownership again (fence, catch up); after any other
// they do too, unless Config.ResumeFailedRounds, with which they resume
// (partition.resume): each reads what the failed round left past its
// known end and goes on, its queued requests waiting. No round
// fails for its size: each partition's part of it is bounded in bytes
// below the topics' max.message.bytes (batchbytes.go).
type committer struct {
	w     *Writer
	log   *slog.Logger
	txnID string
	subs  chan *submission
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

	// lease is when the latest accepted fence was sent (leaseNow; 0:
	// none): reads confirm by it until ReadLease later (lease.go).
	lease atomic.Int64
}

// submission is one partition's batch for the next round.
type submission struct {
	p    *partition
	recs []*kgo.Record
	// offset is the writer group's offset for p before this batch (its
	// known end); the round raises it past the batch's last record.
	offset int64
	done   chan roundResult // buffered: run never blocks on an answer
}

// roundResult is a round's outcome and the session it ran in.
type roundResult struct {
	err     error
	session uint64
}

// errCommitterStopped answers a submission that came after the writer
// stopped committing.
var errCommitterStopped = errors.New("the writer's committer stopped")

// errNoRound answers the readers waiting for a round's fence when the
// committer ran out of submissions: they confirm with the brokers.
var errNoRound = errors.New("no round under way")

// awaitFence returns a channel that answers once a round's second fence
// (its TxnOffsetCommit, presenting this writer's group membership) sent
// after this call was accepted (nil) or not (an error), or nil when no
// round is under way: then none may follow, and the caller asks the
// brokers instead. See partition.confirm for what an accepted fence
// proves to a read.
func (c *committer) awaitFence() <-chan error {
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
func (c *committer) releaseFenceWaiters(err error) {
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

func newCommitter(w *Writer, txnID string) *committer {
	return &committer{
		w:      w,
		log:    w.log.With("transactionalId", txnID),
		txnID:  txnID,
		subs:   make(chan *submission, w.cfg.Topics.Partitions),
		passes: make(chan int32, w.cfg.Topics.Partitions),
		done:   make(chan struct{}),
		next:   make(chan struct{}),
	}
}

// commit appends recs of p in the next round and returns its outcome and
// session. It waits for the round whatever ctx does: a round, once
// started, is finished (cancelling it would leave the outcome unknown).
func (c *committer) commit(p *partition, recs []*kgo.Record) roundResult {
	p.mu.RLock()
	s := &submission{p: p, recs: recs, offset: p.end, done: make(chan roundResult, 1)}
	p.mu.RUnlock()
	select {
	case c.subs <- s:
	case <-c.done:
		return roundResult{err: errCommitterStopped}
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
			return roundResult{err: errCommitterStopped}
		}
	}
}

// await returns once a session after s began, or when ctx ends.
func (c *committer) await(ctx context.Context, s uint64) error {
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
			return errCommitterStopped
		}
	}
}

// run starts the first session and runs rounds until ctx ends. The writer
// ends ctx only after every partition stopped, so no round is under way
// then.
func (c *committer) run(ctx context.Context) {
	defer close(c.done)
	defer func() {
		if c.prod != nil {
			c.prod.Close()
		}
	}()
	if !c.renew(ctx) {
		return
	}
	defer c.releaseFenceWaiters(errCommitterStopped)
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
		if fenced := (*groupFencedError)(nil); c.implicitAdd && errors.As(err, &fenced) && errors.Is(fenced.err, kerr.InvalidTxnState) {
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
				owed[s.p.id] = true
			}
			s.done <- roundResult{err: err, session: session}
		}
		if err != nil {
			c.releaseFenceWaiters(err)
			c.w.metrics.txnFailures.Inc()
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
// submit their next batch or pass (nothing queued), up to the writer's
// RoundGather, and takes every other submission queued meanwhile. Without
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
// wait for that round's fence (awaitFence). Once nothing is owed and
// nothing queued it is idle: the waiting readers ask the brokers instead,
// and so do later ones, until a submission comes.
func (c *committer) collect(ctx context.Context, round []*submission, owed map[int32]bool, timer *time.Timer) ([]*submission, bool) {
	if len(owed) > 0 && c.w.cfg.RoundGather > 0 {
		start := time.Now()
		timer.Reset(c.w.cfg.RoundGather)
	gather:
		for len(owed) > 0 && len(round) < cap(round) {
			select {
			case s := <-c.subs:
				round = append(round, s)
				delete(owed, s.p.id)
			case id := <-c.passes:
				delete(owed, id)
			case <-timer.C:
				c.w.metrics.gatherTimeouts.Inc()
				break gather
			case <-ctx.Done():
				timer.Stop()
				return round, false
			}
		}
		timer.Stop()
		c.w.metrics.gatherSeconds.Observe(time.Since(start).Seconds())
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

// pass tells the next round that partition id, answered by the previous
// one, has nothing to submit: it need not wait for it (collect).
func (c *committer) pass(id int32) {
	select {
	case c.passes <- id:
	default: // full: stale passes; the round's timer bounds the wait
	}
}

// renew builds the next session's producer and runs its InitProducerID,
// retrying until it succeeds or ctx ends (false).
func (c *committer) renew(ctx context.Context) bool {
	cfg := c.w.cfg
	backoff := 100 * time.Millisecond
	for {
		prod, err := cfg.Kafka.NewClient("writer_producer", cfg.Brokers,
			kgo.TransactionalID(c.txnID),
			kgo.TransactionTimeout(cfg.TransactionTimeout),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchMaxBytesFn(c.w.limits.producerLimit),
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
func (c *committer) failQueued(err error) {
	c.mu.Lock()
	session := c.session
	c.mu.Unlock()
	for {
		select {
		case s := <-c.subs:
			s.done <- roundResult{err: fmt.Errorf("no shared transactional producer: %w", err), session: session}
		default:
			return
		}
	}
}

// round commits the submissions in one transaction, committed only when
// the second fence (fence.go) holds for every partition of it.
func (c *committer) round(ctx context.Context, round []*submission) error {
	cfg := c.w.cfg
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.TransactionTimeout)
	defer cancel()
	prod := c.prod
	var recs []*kgo.Record
	for _, s := range round {
		recs = append(recs, s.recs...)
	}
	if err := prod.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// Produce, then the offset commit, then EndTxn: a transaction whose
	// offset commit the group accepted has its records on the log
	// already, so a new owner's settledEnd sees it open (fence.go). The
	// group's admission to the transaction (add) goes beside the produce.
	f := groupFence{txnID: c.txnID, group: cfg.Group, topic: cfg.Topics.Changes, topicID: round[0].p.topicID}
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
		o := max(offsets[s.p.id], s.offset)
		for _, r := range s.recs {
			if r.Topic == cfg.Topics.Changes {
				o = max(o, r.Offset+1)
			}
		}
		offsets[s.p.id] = o
	}
	// Readers that arrived before this point are confirmed by this
	// round's fence (awaitFence); later ones by the next round's.
	c.mu.Lock()
	readers := c.fenceWaiters
	c.fenceWaiters = nil
	c.mu.Unlock()
	m, ok := c.w.groupMember()
	if !ok {
		err := &groupFencedError{membership: m, err: errNotInGroup}
		answerFenceWaiters(readers, err)
		return err
	}
	sent := leaseNow()
	err = f.commitOffsets(tctx, prod, m, offsets)
	answerFenceWaiters(readers, err)
	if err != nil {
		return err
	}
	c.extendLease(sent)
	if err := prod.EndTransaction(tctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	c.w.metrics.transactions.Inc()
	c.w.metrics.roundPartitions.Observe(float64(len(round)))
	return nil
}
