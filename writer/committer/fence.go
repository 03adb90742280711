package committer

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

// The second fence (KIP-447) ties every shared transaction to this
// writer's membership of the writer group: before committing, the
// transaction carries an offset commit for the writer group (one
// TxnOffsetCommit v3+ naming every partition of the round, with the
// member id, generation and instance id the writer's group client
// currently holds: Config.Member; preceded by an AddOffsetsToTxn unless
// the brokers speak KIP-890 part 2, where the commit admits the group
// itself: implicitGroupAdd), and the group coordinator refuses it
// (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID: a
// *FencedError) when the group has moved on without this writer. Why
// that, with the partition fence, keeps an older owner from overtaking a
// newer one is the writer's argument (package writer, fence.go).

// Membership is what the second fence presents to the group coordinator.
type Membership struct {
	Member   string
	Gen      int32
	Instance *string // static membership; nil for dynamic
}

// FencedError is a transaction the group coordinator refused, or one
// this writer refused to commit because it is not in the group.
type FencedError struct {
	Membership
	Err error
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("writer group fence (member %q, generation %d): %v", e.Member, e.Gen, e.Err)
}

func (e *FencedError) Unwrap() error { return e.Err }

// ErrNotInGroup is the fence's answer while this writer is not a member of
// the writer group (not joined yet, or its membership was lost).
var ErrNotInGroup = errors.New("this writer is not a member of the writer group")

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
func (f groupFence) run(ctx context.Context, prod *kgo.Client, m Membership, offsets map[int32]int64) error {
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
// *FencedError.
func (f groupFence) commitOffsets(ctx context.Context, prod *kgo.Client, m Membership, offsets map[int32]int64) error {
	pid, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID = f.txnID
	req.Group = f.group
	req.ProducerID = pid
	req.ProducerEpoch = epoch
	req.Generation = m.Gen
	req.MemberID = m.Member
	req.InstanceID = m.Instance
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
				return &FencedError{Membership: m, Err: err}
			}
			answered++
		}
	}
	if answered != len(offsets) {
		return fmt.Errorf("transactional offset commit: %d of %d partitions answered", answered, len(offsets))
	}
	return nil
}
