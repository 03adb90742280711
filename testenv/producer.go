package testenv

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// Producer writes events to a Broker's kv.changes and conflicts to its
// kv.conflicts inside Kafka transactions, as a writer does, each to the
// partition of its scope. It remembers, per partition of kv.changes, the
// offset after the last record it committed.
type Producer struct {
	// Client is the transactional client, closed at cleanup.
	Client *kgo.Client
	topics changelog.Topics

	mu   sync.Mutex
	ends map[int32]int64
}

var producers atomic.Int64

// MustProducer returns a transactional producer on b with a transactional
// id of its own, closed when the test ends.
func MustProducer(tb testing.TB, b *Broker) *Producer {
	tb.Helper()
	cl, err := b.Kafka.NewClient("testenv_producer", b.Addrs,
		kgo.TransactionalID(fmt.Sprintf("testenv-producer-%d", producers.Add(1))),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(10*time.Second),
	)
	if err != nil {
		tb.Fatalf("producer: %v", err)
	}
	tb.Cleanup(cl.Close)
	return &Producer{Client: cl, topics: b.Topics, ends: make(map[int32]int64)}
}

// MustProduce commits evs (see Producer.Records) to b in one transaction.
func MustProduce(tb testing.TB, b *Broker, evs ...any) {
	tb.Helper()
	MustProducer(tb, b).Commit(tb, evs...)
}

// Records returns the records of evs, each an contract.Event or
// decide.Conflict (or a pointer to one), in the partition of its scope.
func (p *Producer) Records(tb testing.TB, evs ...any) []*kgo.Record {
	tb.Helper()
	rs := make([]*kgo.Record, 0, len(evs))
	for _, v := range evs {
		var r *kgo.Record
		var err error
		switch e := v.(type) {
		case contract.Event:
			r, err = changelog.Record(&e, p.topics.Changes, changelog.Partition(e.Scope, p.topics.Partitions), "test")
		case *contract.Event:
			r, err = changelog.Record(e, p.topics.Changes, changelog.Partition(e.Scope, p.topics.Partitions), "test")
		case decide.Conflict:
			r, err = changelog.ConflictRecord(&e, p.topics.Conflicts, changelog.Partition(e.Scope, p.topics.Partitions), "test")
		case *decide.Conflict:
			r, err = changelog.ConflictRecord(e, p.topics.Conflicts, changelog.Partition(e.Scope, p.topics.Partitions), "test")
		default:
			tb.Fatalf("produce %T: want a contract.Event or decide.Conflict", v)
		}
		if err != nil {
			tb.Fatalf("record: %v", err)
		}
		rs = append(rs, r)
	}
	return rs
}

// Commit produces evs (see Records) in one committed transaction.
func (p *Producer) Commit(tb testing.TB, evs ...any) {
	tb.Helper()
	p.Txn(tb, true, p.Records(tb, evs...)...)
}

// Abort produces evs (see Records) in one aborted transaction.
func (p *Producer) Abort(tb testing.TB, evs ...any) {
	tb.Helper()
	p.Txn(tb, false, p.Records(tb, evs...)...)
}

// Txn produces rs in one transaction and commits it, or aborts it.
func (p *Producer) Txn(tb testing.TB, commit bool, rs ...*kgo.Record) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Client.BeginTransaction(); err != nil {
		tb.Fatalf("begin transaction: %v", err)
	}
	if err := p.Client.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		tb.Fatalf("produce: %v", err)
	}
	if err := p.Client.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		tb.Fatalf("end transaction: %v", err)
	}
	if !commit {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range rs {
		if r.Topic == p.topics.Changes {
			p.ends[r.Partition] = max(p.ends[r.Partition], r.Offset+1)
		}
	}
}

// Committed returns the last stable offset of each partition of
// kv.changes this producer committed to: the offset a consumer that read
// everything stores (past the commit markers).
func (p *Producer) Committed(tb testing.TB) map[int32]int64 {
	tb.Helper()
	p.mu.Lock()
	written := make(map[int32]bool, len(p.ends))
	for k := range p.ends {
		written[k] = true
	}
	p.mu.Unlock()
	out := make(map[int32]int64)
	for k, v := range EndOffsets(context.Background(), tb, p.Client, p.topics.Changes) {
		if written[k] {
			out[k] = v
		}
	}
	return out
}
