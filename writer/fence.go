package writer

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/writer/committer"
)

// Fencing: who may append to a partition of kv.changes.
//
// The partition fence and epoch. At each start of its ownership of
// partition N a writer runs InitProducerID on the transactional id
// kv-writer-p<N> with a short-lived client (own): the epoch it returns is
// the ownership epoch, written in every event as writerEpoch and recorded
// by SetOwner; it grows with each owner of the partition. Nothing is ever
// produced under that id: a writer appends every partition's batches in
// the transactions of its one shared producer (package committer). So unlike
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
// package committer), and the group coordinator
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
//     to commit without asking (committer.ErrNotInGroup). The coordinator checks
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

// groupMember returns the writer group membership the second fence
// presents: the member id and generation the group client holds now, and
// the static instance id. ok is false while the writer is not a member.
func (w *Writer) groupMember() (m committer.Membership, ok bool) {
	w.mu.RLock()
	g, joined := w.group, w.joined
	w.mu.RUnlock()
	if g == nil {
		return committer.Membership{Gen: -1}, false
	}
	m.Member, m.Gen = g.GroupMetadata()
	if w.cfg.InstanceID != "" {
		id := w.cfg.InstanceID
		m.Instance = &id
	}
	return m, joined && m.Member != "" && m.Gen >= 0
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
// revoking it ends ctx). Re-fencing before that would let a writer the
// group dropped take the partition from its new owner again, and again
// at every try: the wait has no bound of its own, since a group client
// on a connection the network cut learns where it stands only when its
// request times out, often several sessions later (chaos, seed
// 1796101726441394891: a writer cut from the broker took partitions back
// from their owners every 3.6 s, a session, for half a minute after the
// heal). The real owner serves the partition meanwhile.
func (p *partition) awaitGroupChange(ctx context.Context, fenced *committer.FencedError) {
	for {
		m, ok := p.w.groupMember()
		if ok && (m.Member != fenced.Member || m.Gen != fenced.Gen) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}
