package writer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eskv/eskv/changelog"
)

// Fencing: who may append to a partition of kv.changes.
//
// The partition fence and epoch. At each start of its ownership of
// partition N a writer runs InitProducerID on the transactional id
// kv-writer-p<N> with a short-lived client (own): the epoch it returns is
// the ownership epoch, written in every event as writerEpoch and recorded
// by SetOwner; it grows with each owner of the partition. Nothing is ever
// produced under that id: a writer appends every partition's batches in
// the transactions of its one shared producer (committer.go). So unlike
// a per-partition producer, the partition fence aborts nothing of an
// older owner: its writes sit in the older owner's shared transaction.
//
// The second fence (KIP-447) ties every shared transaction to this
// writer's membership of the writer group: before committing, the
// transaction carries an offset commit for the writer group (one
// TxnOffsetCommit v3+ naming every partition of the round, with the
// member id, generation and instance id this writer's group client
// currently holds; preceded by an AddOffsetsToTxn unless the brokers
// speak KIP-890 part 2, where the commit admits the group itself:
// implicitGroupAdd), and the group coordinator
// refuses it (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID)
// when the group has moved on without this writer. A refused check
// leaves the transaction uncommitted: every partition of the round
// restarts its ownership, and the committer drops its producer without
// ending the transaction (never an EndTxn(abort) with a producer that saw
// an error) and starts a new one, whose InitProducerID aborts it.
//
// Why a new owner of partition N never misses, nor is overtaken by, an
// older owner's write:
//
//  1. The new owner reads the log only once no transaction of any
//     producer is open on N (settledEnd: last stable offset = high
//     watermark). An older owner's transaction still open there holds
//     the new owner back until it commits or is aborted — by the older
//     writer's next producer, or by the broker at the transaction
//     timeout.
//  2. An older owner that lost N either revoked it (cooperative
//     rebalancing: revoke waits until the partition's goroutine stopped,
//     which waits for its round to end, committed or not, before the
//     group hands N on) or was dropped from the group (its member id or
//     generation then fails TxnOffsetCommit, so it commits nothing
//     more). While kgo reports the membership lost, the writer refuses
//     to commit without asking (errNotInGroup). The coordinator checks
//     membership and generation, not which partitions the member holds;
//     these two cases are all there are.
//  3. Every round runs produce, then TxnOffsetCommit, then EndTxn. A
//     transaction whose offset commit the coordinator accepted (before
//     the group moved on) had produced already, so the new owner's
//     settledEnd sees it open on N and waits for its end.
//
// What this gives up against a producer per partition, whose fence
// aborted the older owner's transaction at once: when a writer with
// dynamic membership crashes, or a partition moves away from a writer
// while that writer has a transaction open on it that it can no longer
// end (paused, cut off), the new owner waits up to the transaction
// timeout for the broker to abort it. A restarted writer with a static
// InstanceID reuses its shared transactional id, so its first
// InitProducerID aborts its predecessor's transaction at once.
//
// The committed offset itself is harmless: the writer group never fetches
// (its client pauses kv.changes) and nothing reads its offsets. It is the
// offset after the last record a transaction appended to the partition,
// so the group's offsets follow the log. (The group client still fetches
// them on assignment, after OnPartitionsAssigned; kfake answers
// UNSTABLE_OFFSET_COMMIT while any transaction holds offsets of the group,
// Kafka only for the partitions concerned, and kgo retries each second in
// the background: nothing the writer waits for.)

// membership is what the second fence presents to the group coordinator.
type membership struct {
	member   string
	gen      int32
	instance *string // static membership; nil for dynamic
}

// groupFencedError is a transaction the group coordinator refused, or one
// this writer refused to commit because it is not in the group.
type groupFencedError struct {
	membership
	err error
}

func (e *groupFencedError) Error() string {
	return fmt.Sprintf("writer group fence (member %q, generation %d): %v", e.member, e.gen, e.err)
}

func (e *groupFencedError) Unwrap() error { return e.err }

// errNotInGroup is the fence's answer while this writer is not a member of
// the writer group (not joined yet, or its membership was lost).
var errNotInGroup = errors.New("this writer is not a member of the writer group")

// groupMember returns the writer group membership the second fence
// presents: the member id and generation the group client holds now, and
// the static instance id. ok is false while the writer is not a member.
func (w *Writer) groupMember() (m membership, ok bool) {
	w.mu.RLock()
	g, joined := w.group, w.joined
	w.mu.RUnlock()
	if g == nil {
		return membership{gen: -1}, false
	}
	m.member, m.gen = g.GroupMetadata()
	if w.cfg.InstanceID != "" {
		id := w.cfg.InstanceID
		m.instance = &id
	}
	return m, joined && m.member != "" && m.gen >= 0
}

// groupFence names what the second fence sends besides the membership:
// the shared transactional id, the writer group and kv.changes.
type groupFence struct {
	txnID   string
	group   string
	topic   string
	topicID [16]byte
}

// run runs the second fence inside prod's open transaction, presenting m
// and committing offsets (partition -> offset) on behalf of the writer
// group. It must run after the transaction's produce and before
// EndTransaction; any error means the transaction must not be committed.
// The committer runs its two steps apart (add beside the produce, then
// commitOffsets after it).
func (f groupFence) run(ctx context.Context, prod *kgo.Client, m membership, offsets map[int32]int64) error {
	if err := f.add(ctx, prod)(); err != nil {
		return err
	}
	return f.commitOffsets(ctx, prod, m, offsets)
}

// add starts adding the writer group's offsets to prod's open transaction
// (AddOffsetsToTxn) and returns a function that waits for the outcome. It
// may run beside the transaction's produce, saving a broker round trip per
// round: it only admits the group to the transaction; the offset commit,
// which the argument above needs after the produce, is commitOffsets.
func (f groupFence) add(ctx context.Context, prod *kgo.Client) (wait func() error) {
	done := make(chan error, 1)
	go func() {
		// The producer id and epoch of this transaction: under KIP-890
		// (transaction.version 2, which kfake speaks) every EndTxn bumps
		// the epoch, so the epoch of InitProducerID is stale from the
		// second transaction on.
		pid, epoch, err := prod.ProducerID(ctx)
		if err != nil {
			done <- fmt.Errorf("producer id: %w", err)
			return
		}
		if err := f.addOffsetsToTxn(ctx, prod, pid, epoch); err != nil {
			done <- fmt.Errorf("add offsets to transaction: %w", err)
			return
		}
		done <- nil
	}()
	return func() error { return <-done }
}

// implicitGroupAdd reports whether the brokers admit a transaction's
// consumer group with the transaction's TxnOffsetCommit, so that no
// AddOffsetsToTxn is needed (KIP-890 part 2): the cluster finalized
// transaction.version 2 and the broker answering speaks TxnOffsetCommit
// v5+ (kgo then sends v5+). franz-go makes the same check before it
// drops AddPartitionsToTxn for produces. The fence is the same either
// way: the TxnOffsetCommit, after the produce, presenting the
// membership. Any doubt (the request fails) answers false.
func implicitGroupAdd(ctx context.Context, cl *kgo.Client, log *slog.Logger) bool {
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		log.Warn("asking the brokers for KIP-890 support failed; the shared transactions send AddOffsetsToTxn", "err", err)
		return false
	}
	tv2 := slices.ContainsFunc(resp.FinalizedFeatures, func(f kmsg.ApiVersionsResponseFinalizedFeature) bool {
		return f.Name == "transaction.version" && f.MaxVersionLevel >= 2
	})
	v5 := slices.ContainsFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
		return k.ApiKey == kmsg.TxnOffsetCommit.Int16() && k.MaxVersion >= 5
	})
	return tv2 && v5
}

// addOffsetsToTxnRetry asks again while the coordinator is still
// completing the previous transaction (Kafka writes markers
// asynchronously): the request was not applied, asking again is safe.
var addOffsetsToTxnRetry = changelog.Retry{
	Base: 5 * time.Millisecond, Cap: 100 * time.Millisecond,
	Retriable: func(err error) bool { return errors.Is(err, kerr.ConcurrentTransactions) },
}

// addOffsetsToTxn adds the writer group's offsets to the transaction.
func (f groupFence) addOffsetsToTxn(ctx context.Context, prod *kgo.Client, pid int64, epoch int16) error {
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID = f.txnID
	add.ProducerID = pid
	add.ProducerEpoch = epoch
	add.Group = f.group
	return addOffsetsToTxnRetry.Do(ctx, func(ctx context.Context) error {
		resp, err := add.RequestWith(ctx, prod)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

// commitOffsets is the fence itself, once the transaction's records are
// produced and add succeeded: the transactional offset commit of offsets
// presenting m; the group coordinator's refusal of any partition is a
// *groupFencedError.
func (f groupFence) commitOffsets(ctx context.Context, prod *kgo.Client, m membership, offsets map[int32]int64) error {
	pid, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID = f.txnID
	req.Group = f.group
	req.ProducerID = pid
	req.ProducerEpoch = epoch
	req.Generation = m.gen
	req.MemberID = m.member
	req.InstanceID = m.instance
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	// Both name and ID: the version negotiated decides which goes on
	// the wire (v6 replaced the name with the ID, KIP-1319).
	rt.Topic, rt.TopicID = f.topic, f.topicID
	for id, o := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition = id
		rp.Offset = o
		rp.LeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, prod)
	if err != nil {
		return fmt.Errorf("transactional offset commit: %w", err)
	}
	if req.GetVersion() < 3 {
		// Before v3 the request carries no generation: the broker
		// would accept any writer, so there is no fence to rely on.
		return fmt.Errorf("transactional offset commit: the broker speaks v%d, the generation check needs v3+", req.GetVersion())
	}
	answered := 0
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if _, asked := offsets[rp.Partition]; !asked {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return &groupFencedError{membership: m, err: err}
			}
			answered++
		}
	}
	if answered != len(offsets) {
		return fmt.Errorf("transactional offset commit: %d of %d partitions answered", answered, len(offsets))
	}
	return nil
}

// txnID is the transactional id of the partition fence: its epoch is the
// ownership epoch, and nothing is produced under it.
func (p *partition) txnID() string {
	return fmt.Sprintf("%s%d", p.w.cfg.TransactionalIDPrefix, p.id)
}

// fence bumps the epoch of the partition's transactional id and returns
// it: this ownership's epoch, above every earlier owner's.
func (p *partition) fence(ctx context.Context) (int16, error) {
	cfg := p.w.cfg
	cl, err := cfg.Kafka.NewClient("writer_fence", cfg.Brokers,
		kgo.TransactionalID(p.txnID()),
		kgo.TransactionTimeout(cfg.TransactionTimeout),
		kgo.WithLogger(changelog.Logger(p.log)),
	)
	if err != nil {
		return 0, fmt.Errorf("fence client: %w", err)
	}
	defer cl.Close()
	_, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return 0, fmt.Errorf("fence: %w", err)
	}
	return epoch, nil
}

// awaitGroupChange waits, after a refused fence, until this writer's group
// membership differs from the one the fence presented (the group client
// rejoined: if the partition is still ours the group says so, otherwise
// revoking it ends ctx), for at most d. Re-fencing at once would let a
// writer the group dropped take the partition from its new owner again.
func (p *partition) awaitGroupChange(ctx context.Context, fenced *groupFencedError, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		m, ok := p.w.groupMember()
		if ok && (m.member != fenced.member || m.gen != fenced.gen) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}
