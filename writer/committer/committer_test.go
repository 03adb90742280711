package committer

// Tests of the committer alone (committer.go), the test playing the
// writer: it joins the writer group and submits the partitions' batches.
// The writer's use of it (partitions failing and resuming with their
// rounds, readers waiting for a round's fence) is tested in package
// writer.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eskv/eskv/testenv"
)

// start runs a committer of the rig's shared transactional id and group
// over parts partitions, presenting member (not a member when nil).
func (r *fenceRig) start(t *testing.T, parts int32, member func() (Membership, bool)) *Committer {
	t.Helper()
	c := New(Config{
		Brokers: r.broker.Addrs, TxnID: r.f.txnID, TransactionTimeout: 10 * time.Second,
		Group: r.f.group, Topic: r.f.topic, Partitions: parts, RoundGather: time.Millisecond,
		ProducerLimit: func(string) int32 { return 1 << 20 },
		Member:        member, Clock: func() int64 { return time.Now().UnixNano() }, Leases: true,
		Log: slog.New(slog.DiscardHandler), Metrics: NewMetrics(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	go c.Run(ctx)
	t.Cleanup(func() {
		cancel()
		<-c.Done()
	})
	return c
}

// commitAll commits one record with value v on each of parts partitions,
// concurrently, and returns the results by partition.
func (r *fenceRig) commitAll(c *Committer, parts int32, v string) ([]Result, []*kgo.Record) {
	res := make([]Result, parts)
	recs := make([]*kgo.Record, parts)
	var wg sync.WaitGroup
	for p := range parts {
		recs[p] = &kgo.Record{Topic: r.f.topic, Partition: p, Value: []byte(v)}
		wg.Go(func() {
			res[p] = c.Commit(Batch{Partition: p, Records: recs[p : p+1], TopicID: r.f.topicID})
		})
	}
	wg.Wait()
	return res, recs
}

// countRequests counts the requests of the shared transactional id txnID
// the broker receives, by key.
func countRequests(b *testenv.Broker, txnID string) func() map[int16]int {
	var mu sync.Mutex
	counts := map[int16]int{}
	count := func(key kmsg.Key, id func(kmsg.Request) string) {
		b.Cluster.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			if id(req) == txnID {
				mu.Lock()
				counts[int16(key)]++
				mu.Unlock()
			}
			return nil, nil, false
		})
	}
	count(kmsg.Produce, func(r kmsg.Request) string {
		if id := r.(*kmsg.ProduceRequest).TransactionID; id != nil {
			return *id
		}
		return ""
	})
	count(kmsg.AddPartitionsToTxn, func(r kmsg.Request) string {
		req := r.(*kmsg.AddPartitionsToTxnRequest)
		if len(req.Transactions) > 0 {
			return req.Transactions[0].TransactionalID
		}
		return req.TransactionalID
	})
	count(kmsg.AddOffsetsToTxn, func(r kmsg.Request) string { return r.(*kmsg.AddOffsetsToTxnRequest).TransactionalID })
	count(kmsg.TxnOffsetCommit, func(r kmsg.Request) string { return r.(*kmsg.TxnOffsetCommitRequest).TransactionalID })
	count(kmsg.EndTxn, func(r kmsg.Request) string { return r.(*kmsg.EndTxnRequest).TransactionalID })
	return func() map[int16]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(counts)
	}
}

// TestCommitterRoundRequests counts the shared producer's requests per
// round: under KIP-890 part 2 (kfake finalizes transaction.version 2) a
// round is one Produce, one TxnOffsetCommit (the fence, admitting the
// group itself) and one EndTxn, with no AddOffsetsToTxn and no
// AddPartitionsToTxn. Each round moves the group's offsets of its
// partitions past their records, and answers a lease.
func TestCommitterRoundRequests(t *testing.T) {
	const parts = 3
	b := testenv.MustBroker(t, parts)
	r := newFenceRig(t, b, "rounds")
	_, m := r.join(t, "")
	counts := countRequests(b, r.f.txnID)
	c := r.start(t, parts, func() (Membership, bool) { return m, true })
	var last []*kgo.Record
	for i := range 5 {
		res, recs := r.commitAll(c, parts, fmt.Sprint("v", i))
		for p, res := range res {
			if res.Err != nil || res.Session != 1 {
				t.Fatalf("round %d, partition %d: %+v; want committed in session 1", i, p, res)
			}
		}
		last = recs
	}
	if !c.implicitAdd {
		t.Fatal("the committer did not find KIP-890 part 2 support on kfake (transaction.version 2)")
	}
	rounds := int(testutil.ToFloat64(c.cfg.Metrics.Transactions))
	want := map[int16]int{int16(kmsg.Produce): rounds, int16(kmsg.TxnOffsetCommit): rounds, int16(kmsg.EndTxn): rounds}
	if got := counts(); rounds < 5 || !maps.Equal(got, want) {
		t.Fatalf("%d rounds sent %v requests (by key); want %v", rounds, got, want)
	}
	os, err := r.adm.FetchOffsets(t.Context(), r.f.group)
	if err != nil {
		t.Fatal(err)
	}
	for p, rec := range last {
		if o, _ := os.Lookup(r.f.topic, int32(p)); o.At != rec.Offset+1 {
			t.Errorf("partition %d: group offset %d; want %d, past the last record", p, o.At, rec.Offset+1)
		}
	}
	if c.LeaseSent() == 0 {
		t.Error("no lease after accepted fences")
	}
}

// TestCommitterNotInGroup: while the writer is not a member of its group
// the fence refuses every round without asking the coordinator; the
// batches fail with the session they ran in, and the producer is
// replaced (a later session begins).
func TestCommitterNotInGroup(t *testing.T) {
	b := testenv.MustBroker(t, 2)
	r := newFenceRig(t, b, "out")
	c := r.start(t, 2, func() (Membership, bool) { return Membership{Gen: -1}, false })
	res, _ := r.commitAll(c, 2, "refused")
	var session uint64
	for p, res := range res {
		var fenced *FencedError
		if !errors.As(res.Err, &fenced) || !errors.Is(res.Err, ErrNotInGroup) || res.Session < 1 {
			t.Fatalf("partition %d: %+v; want ErrNotInGroup in a session", p, res)
		}
		session = max(session, res.Session)
	}
	if err := c.Await(t.Context(), session); err != nil {
		t.Fatalf("await the next session: %v", err)
	}
	if n := testutil.ToFloat64(c.cfg.Metrics.TxnFailures); n < 1 {
		t.Fatalf("%v failed transactions; want the refused round", n)
	}
	if vs := r.committedValues(t); len(vs) != 0 {
		t.Fatalf("committed %q; want nothing", vs)
	}
	if c.LeaseSent() != 0 {
		t.Error("a lease without an accepted fence")
	}
}
