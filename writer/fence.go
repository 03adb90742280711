package writer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eskv/eskv/changelog"
)

// The second fence (KIP-447). The first fence is the transactional id
// kv-writer-p<N>: a new owner's InitProducerID bumps its epoch, so an older
// owner's next produce or commit fails. The second fence ties every
// transaction to this writer's membership of the writer group: before
// committing, the transaction carries an offset commit for the writer
// group (AddOffsetsToTxn, then TxnOffsetCommit v3+ with the member id,
// generation and instance id this writer's group client currently holds),
// and the group coordinator refuses it (ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) when the group has moved on
// without this writer. A refused check leaves the transaction uncommitted:
// commit returns the error, the partition drops its producer without
// ending the transaction (never an EndTxn(abort) with a producer that saw
// an error), and the next owner's InitProducerID aborts it.
//
// The coordinator checks membership and generation, not which partitions
// the member holds. That suffices: a partition moves to another writer
// only after this writer revoked it (cooperative rebalancing: revoke waits
// until the partition stopped, so no transaction of it is under way) or
// after the group dropped this writer (its member id or generation then
// fails the check). While kgo reports the membership lost, the writer
// refuses to commit without asking (errNotInGroup).
//
// The committed offset itself is harmless: the writer group never fetches
// (its client pauses kv.changes) and nothing reads its offsets. It is the
// offset after the last record this transaction appended to the partition,
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

// fenceGroup runs the second fence inside prod's open transaction,
// presenting m and committing offset for this partition on behalf of the
// writer group. It must run after the transaction's produce and before
// EndTransaction; any error means the transaction must not be committed.
func (p *partition) fenceGroup(ctx context.Context, prod *kgo.Client, m membership, offset int64) error {
	// The producer id and epoch of this transaction: under KIP-890
	// (transaction.version 2, which kfake speaks) every
	// EndTxn bumps the epoch, so the epoch of the fencing InitProducerID
	// is stale from the second transaction on.
	pid, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("producer id: %w", err)
	}
	if err := p.addOffsetsToTxn(ctx, prod, pid, epoch); err != nil {
		return fmt.Errorf("add offsets to transaction: %w", err)
	}
	return p.txnOffsetCommit(ctx, prod, pid, epoch, m, offset)
}

// addOffsetsToTxnRetry asks again while the coordinator is still
// completing the previous transaction (Kafka writes markers
// asynchronously): the request was not applied, asking again is safe.
var addOffsetsToTxnRetry = changelog.Retry{
	Base: 5 * time.Millisecond, Cap: 100 * time.Millisecond,
	Retriable: func(err error) bool { return errors.Is(err, kerr.ConcurrentTransactions) },
}

// addOffsetsToTxn adds the writer group's offsets to the transaction.
func (p *partition) addOffsetsToTxn(ctx context.Context, prod *kgo.Client, pid int64, epoch int16) error {
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID = p.txnID()
	add.ProducerID = pid
	add.ProducerEpoch = epoch
	add.Group = p.w.cfg.Group
	return addOffsetsToTxnRetry.Do(ctx, func(ctx context.Context) error {
		resp, err := add.RequestWith(ctx, prod)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

// txnOffsetCommit commits offset for this partition in the transaction,
// presenting m; the group coordinator's refusal is a *groupFencedError.
func (p *partition) txnOffsetCommit(ctx context.Context, prod *kgo.Client, pid int64, epoch int16, m membership, offset int64) error {
	cfg := p.w.cfg
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID = p.txnID()
	req.Group = cfg.Group
	req.ProducerID = pid
	req.ProducerEpoch = epoch
	req.Generation = m.gen
	req.MemberID = m.member
	req.InstanceID = m.instance
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	// Both name and ID: the version negotiated decides which goes on
	// the wire (v6 replaced the name with the ID, KIP-1319).
	rt.Topic, rt.TopicID = cfg.Topics.Changes, p.topicID
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition = p.id
	rp.Offset = offset
	rp.LeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
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
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if rp.Partition != p.id {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return &groupFencedError{membership: m, err: err}
			}
			return nil
		}
	}
	return fmt.Errorf("transactional offset commit: partition %d missing from the answer", p.id)
}

// txnID is the transactional id that fences older owners of the partition.
func (p *partition) txnID() string {
	return fmt.Sprintf("%s%d", p.w.cfg.TransactionalIDPrefix, p.id)
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
