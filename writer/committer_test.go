package writer

// Tests of the shared transaction (package committer) in the writer: one
// Kafka transaction per round across partitions, a failed round failing
// only its own requests, and a new owner waiting for an older owner's
// open transaction (fence.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// readyWriter runs a writer on a broker of its own with parts
// partitions and waits until it owns and has caught up every one.
func readyWriter(t *testing.T, parts int32) (*testenv.Broker, *Writer) {
	t.Helper()
	return readyWriterWith(t, parts, Config{})
}

// readyWriterWith is readyWriter with cfg.
func readyWriterWith(t *testing.T, parts int32, cfg Config) (*testenv.Broker, *Writer) {
	t.Helper()
	b := testenv.MustBroker(t, parts)
	w := runWriter(t, b, projection.New(testenv.MustPostgres(t)), cfg)
	testenv.WaitFor(t, 30*time.Second, "the writer ready", func() bool { return w.Ready() && len(w.owned()) == int(parts) })
	return b, w
}

// keysByPartition returns one key of each of the n partitions.
func keysByPartition(t *testing.T, n int32) []contract.Key {
	t.Helper()
	keys := make([]contract.Key, n)
	found := 0
	for i := 0; found < int(n); i++ {
		if i > 10_000 {
			t.Fatal("no key for every partition")
		}
		k, err := contract.ParseKey(fmt.Sprintf("tenant/t/project/p%d/k", i))
		if err != nil {
			t.Fatal(err)
		}
		if p := changelog.Partition(k.Scope(), n); keys[p].Tenant == "" {
			keys[p] = k
			found++
		}
	}
	return keys
}

func putKey(ctx context.Context, w *Writer, k contract.Key, v string) error {
	_, err := w.Do(ctx, &decide.KV{Header: decide.Header{Key: k, Op: contract.OpPut, Principal: "test"}, Value: json.RawMessage(fmt.Sprintf("%q", v))})
	return err
}

// putAll writes keys concurrently and returns their errors once all
// answered.
func putAll(ctx context.Context, w *Writer, keys []contract.Key, v string) []error {
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { errs[i] = putKey(ctx, w, k, v) })
	}
	wg.Wait()
	return errs
}

// committedRecords returns the committed records of partition p of
// kv.changes, once no transaction is open on it.
func committedRecords(t *testing.T, w *Writer, p int32) []*kgo.Record {
	t.Helper()
	topic := w.cfg.Topics.Changes
	var end int64
	testenv.WaitFor(t, 20*time.Second, "no open transaction on the partition", func() bool {
		lso, err := changelog.LastStableOffset(t.Context(), w.admCl, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		hw, err := w.adm.ListEndOffsets(t.Context(), topic)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := hw.Lookup(topic, p)
		end = lso
		return lso == o.Offset
	})
	var rs []*kgo.Record
	err := changelog.ReadCommitted(t.Context(), w.admCl, changelog.Range{Topic: topic, Partition: p, From: 0, End: end}, func(r *kgo.Record) error {
		rs = append(rs, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// holdFirstEndTxn makes the broker hold the first EndTxn of w's shared
// producer, closing held when it arrived, until release is called.
func holdFirstEndTxn(b *testenv.Broker, w *Writer) (held <-chan struct{}, release func()) {
	arrived, wake := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	b.Cluster.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if req.(*kmsg.EndTxnRequest).TransactionalID == w.committer.TxnID() && once.CompareAndSwap(false, true) {
			close(arrived)
			b.Cluster.SleepControl(func() { <-wake })
		}
		return nil, nil, false
	})
	var closeOnce sync.Once
	return arrived, func() { closeOnce.Do(func() { close(wake) }) }
}

// awaitQueued waits until n submissions wait for the next round.
func awaitQueued(t *testing.T, w *Writer, n int) {
	t.Helper()
	testenv.WaitFor(t, 20*time.Second, fmt.Sprintf("%d batches queued for the next round", n), func() bool {
		return w.committer.Queued() == n
	})
}

func TestCommitterOneTransactionPerRound(t *testing.T) {
	t.Parallel()
	const parts = 4
	b, w := readyWriter(t, parts)
	keys := keysByPartition(t, parts)

	// The first round (partition 0) holds at EndTxn; meanwhile every
	// other partition's batch queues for the next round.
	held, release := holdFirstEndTxn(b, w)
	defer release()
	first := make(chan error, 1)
	go func() { first <- putKey(t.Context(), w, keys[0], "first") }()
	<-held
	rest := make(chan []error, 1)
	go func() { rest <- putAll(t.Context(), w, keys[1:], "rest") }()
	awaitQueued(t, w, parts-1)
	release()
	if err := <-first; err != nil {
		t.Fatalf("first round: %v", err)
	}
	for i, err := range <-rest {
		if err != nil {
			t.Fatalf("write to partition %d: %v", i+1, err)
		}
	}

	if n := testutil.ToFloat64(w.metrics.rounds.Transactions); n != 2 {
		t.Fatalf("%v transactions for %d partition batches; want 2 (one per round)", n, parts)
	}
	// One transaction: the same producer id and (transactions v2: one
	// epoch per transaction) the same epoch on every partition of it.
	var pid int64
	var epoch int16
	for p := int32(1); p < parts; p++ {
		rs := committedRecords(t, w, p)
		if len(rs) != 1 {
			t.Fatalf("partition %d: %d committed records; want 1", p, len(rs))
		}
		if p == 1 {
			pid, epoch = rs[0].ProducerID, rs[0].ProducerEpoch
		} else if rs[0].ProducerID != pid || rs[0].ProducerEpoch != epoch {
			t.Fatalf("partition %d: producer %d epoch %d; partition 1 has producer %d epoch %d (want one transaction)",
				p, rs[0].ProducerID, rs[0].ProducerEpoch, pid, epoch)
		}
	}
}

// TestCommitterFailedRoundFailsOnlyItsPartitions: a round whose produce
// the broker refuses fails only its own writes; its partitions fence and
// catch up again (the default), or resume with ResumeFailedRounds; the
// other partitions write on meanwhile.
func TestCommitterFailedRoundFailsOnlyItsPartitions(t *testing.T) {
	t.Parallel()
	for _, resume := range []bool{false, true} {
		t.Run(map[bool]string{false: "OKRestart", true: "OKResume"}[resume], func(t *testing.T) {
			failedRoundFailsOnlyItsPartitions(t, resume)
		})
	}
}

func failedRoundFailsOnlyItsPartitions(t *testing.T, resume bool) {
	const parts = 4
	b, w := readyWriterWith(t, parts, Config{ResumeFailedRounds: resume})
	keys := keysByPartition(t, parts)

	// Round 1 (partition 0) holds at EndTxn while partitions 1 and 2
	// queue; round 2 (1 and 2) then fails its produce.
	held, release := holdFirstEndTxn(b, w)
	defer release()
	var failNext atomic.Bool
	b.Cluster.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		preq := req.(*kmsg.ProduceRequest)
		if preq.TransactionID == nil || *preq.TransactionID != w.committer.TxnID() || !failNext.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		resp := preq.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range preq.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.InvalidRecord.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	first := make(chan error, 1)
	go func() { first <- putKey(t.Context(), w, keys[0], "ok") }()
	<-held
	failed := make(chan []error, 1)
	go func() { failed <- putAll(t.Context(), w, keys[1:3], "failed") }()
	awaitQueued(t, w, 2)
	failNext.Store(true)
	release()
	if err := <-first; err != nil {
		t.Fatalf("round 1: %v", err)
	}
	for i, err := range <-failed {
		if contract.ErrorCode(err) != contract.EOutcomeUnknown {
			t.Fatalf("write to partition %d in the failed round: %v; want %s", i+1, err, contract.EOutcomeUnknown)
		}
	}

	// Partition 3 was in no failed round: it writes at once, with the
	// committer's next producer, and so does partition 0 again.
	for _, p := range []int{3, 0} {
		if err := putKey(t.Context(), w, keys[p], "next"); err != nil {
			t.Fatalf("partition %d after the failed round: %v", p, err)
		}
	}
	// A refused produce fences nothing: with ResumeFailedRounds the
	// failed round's partitions resume (partition.resume) instead of
	// fencing and catching up; without it they start their ownership
	// again, as after any failure.
	if resume {
		testenv.WaitFor(t, 30*time.Second, "the failed round's partitions resumed", func() bool {
			return testutil.ToFloat64(w.metrics.resumes) == 2
		})
		if n := testutil.ToFloat64(w.metrics.ownershipRestarts); n != 0 {
			t.Fatalf("%v ownership restarts; want 0 (the failed round's partitions resume)", n)
		}
	} else {
		testenv.WaitFor(t, 30*time.Second, "the failed round's partitions restarted", func() bool {
			return testutil.ToFloat64(w.metrics.ownershipRestarts) == 2
		})
		if n := testutil.ToFloat64(w.metrics.resumes); n != 0 {
			t.Fatalf("%v resumes; want 0 (ResumeFailedRounds is off)", n)
		}
	}
	// The failed round's partitions write again; its records were never
	// committed.
	testenv.WaitFor(t, 30*time.Second, "the failed round's partitions ready again", w.Ready)
	for _, p := range []int{1, 2} {
		if err := putKey(t.Context(), w, keys[p], "again"); err != nil {
			t.Fatalf("partition %d after catching up: %v", p, err)
		}
		var vs []string
		for _, r := range committedRecords(t, w, int32(p)) {
			e, err := changelog.Event(r)
			if err != nil {
				t.Fatal(err)
			}
			vs = append(vs, string(e.After))
		}
		if len(vs) != 1 || vs[0] != `"again"` {
			t.Fatalf("partition %d committed %q; want only \"again\"", p, vs)
		}
	}
}

// TestNewOwnerWaitsForOlderOwnersOpenTransaction: an older owner's shared
// transaction still open on a partition (the older writer paused, or cut
// off before it could end it) holds the new owner's catch-up back until
// it ends; then the new owner knows exactly what committed.
func TestNewOwnerWaitsForOlderOwnersOpenTransaction(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "OKSeesTheCommittedWrite", false: "OKAbortedWriteAbsent"}[commit]
		t.Run(name, func(t *testing.T) {
			b := testenv.MustBroker(t, 1)
			key, err := contract.ParseKey("tenant/t/project/p/older")
			if err != nil {
				t.Fatal(err)
			}
			older := testenv.MustProducer(t, b)
			e := contract.Event{Key: key.String(), Scope: key.Scope(), Version: 1, Kind: contract.KindPut, Op: contract.OpPut,
				After: json.RawMessage(`"older"`), Before: json.RawMessage(`null`), TS: time.Now().UTC(), WriterEpoch: 1}
			if err := older.Client.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := older.Client.ProduceSync(t.Context(), older.Records(t, e)...).FirstErr(); err != nil {
				t.Fatal(err)
			}

			w := runWriter(t, b, projection.New(testenv.MustPostgres(t)), Config{})
			testenv.WaitFor(t, 30*time.Second, "the partition assigned", func() bool { return len(w.owned()) == 1 })
			time.Sleep(time.Second) // time to fence and find the transaction open
			if w.Ready() {
				t.Fatal("writer ready with the older owner's transaction open; want it waiting")
			}
			if err := older.Client.EndTransaction(t.Context(), kgo.TransactionEndTry(commit)); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, 30*time.Second, "the writer ready", w.Ready)
			s, err := w.State(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			if commit && (s.Version != 1 || string(s.Entry.Value) != `"older"`) {
				t.Fatalf("state %+v; want the older owner's committed version 1", s)
			}
			if !commit && s.Version != 0 {
				t.Fatalf("state %+v; want none (the older owner's write aborted)", s)
			}
		})
	}
}

// gatherWriter is readyWriter with the given RoundGather.
func gatherWriter(t *testing.T, parts int32, gather time.Duration) (*testenv.Broker, *Writer) {
	t.Helper()
	b := testenv.MustBroker(t, parts)
	w := runWriter(t, b, projection.New(testenv.MustPostgres(t)), Config{RoundGather: gather})
	testenv.WaitFor(t, 30*time.Second, "the writer ready", func() bool { return w.Ready() && len(w.owned()) == int(parts) })
	return b, w
}

// TestRoundWaitsForThePartitionsItAnswered (the committer's gather): the round
// after partition 0's takes partition 0's next batch together with the
// batch partition 1 queued meanwhile, instead of starting with partition
// 1's alone and leaving partition 0's for a third.
func TestRoundWaitsForThePartitionsItAnswered(t *testing.T) {
	t.Parallel()
	b, w := gatherWriter(t, 2, time.Minute)
	keys := keysByPartition(t, 2)
	held, release := holdFirstEndTxn(b, w)
	defer release()
	errs := make(chan error, 3)
	go func() { errs <- putKey(t.Context(), w, keys[0], "first") }()
	<-held
	// While the first round is in flight, partition 0's next write waits
	// in its queue and partition 1's batch for the next round.
	go func() { errs <- putKey(t.Context(), w, keys[0], "second") }()
	_, p0 := w.partition(keys[0])
	testenv.WaitFor(t, 20*time.Second, "partition 0's second write queued", func() bool { return len(p0.calls) == 1 })
	go func() { errs <- putKey(t.Context(), w, keys[1], "other") }()
	awaitQueued(t, w, 1)
	release()
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := testutil.ToFloat64(w.metrics.rounds.Transactions); n != 2 {
		t.Fatalf("%v transactions; want 2: the second round waits for partition 0's next batch", n)
	}
	if n := testutil.ToFloat64(w.metrics.rounds.GatherTimeouts); n != 0 {
		t.Fatalf("%v gather timeouts; want 0", n)
	}
}

// TestRoundDoesNotWaitForAPass: a partition the last round answered with
// nothing queued passes, and the next round starts without it at once,
// not after RoundGather.
func TestRoundDoesNotWaitForAPass(t *testing.T) {
	t.Parallel()
	b, w := gatherWriter(t, 2, time.Minute)
	keys := keysByPartition(t, 2)
	held, release := holdFirstEndTxn(b, w)
	defer release()
	first := make(chan error, 1)
	go func() { first <- putKey(t.Context(), w, keys[0], "first") }()
	<-held
	other := make(chan error, 1)
	go func() { other <- putKey(t.Context(), w, keys[1], "other") }()
	awaitQueued(t, w, 1)
	start := time.Now()
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-other:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the next round waited for a partition that had nothing to submit")
	}
	t.Logf("partition 1's write answered %v after the first round was released", time.Since(start))
	if n := testutil.ToFloat64(w.metrics.rounds.GatherTimeouts); n != 0 {
		t.Fatalf("%v gather timeouts; want 0", n)
	}
}

// TestResumeReadsWhatTheFailedRoundLeft (partition.resume): after a
// failed round whose transaction committed after all (EndTxn sent, its
// answer lost), the partition finds the round's records past its end,
// adds them to its overlay and moves its end past them, so reads are
// confirmed and see them; a record of another ownership's epoch there
// means another writer wrote: errSuperseded.
func TestResumeReadsWhatTheFailedRoundLeft(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		epoch func(own int64) int64
		err   error
	}{
		{"OKOwnEpochJoinsTheOverlay", func(own int64) int64 { return own }, nil},
		{"ErrOtherEpochSupersedes", func(own int64) int64 { return own + 1 }, errSuperseded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, w := readyWriter(t, 1)
			key := mustKey(t, "tenant/t/project/p/committed-anyway")
			if err := putKey(t.Context(), w, mustKey(t, "tenant/t/project/p/before"), "v"); err != nil {
				t.Fatal(err)
			}
			_, p := w.partition(key)
			p.mu.RLock()
			epoch := p.epoch
			p.mu.RUnlock()
			e := contract.Event{Key: key.String(), Scope: key.Scope(), Version: 1, Kind: contract.KindPut, Op: contract.OpPut,
				After: json.RawMessage(`"left"`), Before: json.RawMessage(`null`), TS: time.Now().UTC(), WriterEpoch: tc.epoch(epoch),
				Semantics: contract.Semantics{Purpose: "other"}, RequestID: "req-1", RequestDigest: "d"}
			testenv.MustProduce(t, b, e)
			failedIn := w.committer.Session() - 1 // the session began since

			err := p.resume(t.Context(), epoch, failedIn)
			if !errors.Is(err, tc.err) {
				t.Fatalf("resume: %v; want %v", err, tc.err)
			}
			if tc.err != nil {
				return
			}
			s, err := w.State(t.Context(), key)
			if err != nil || s.Version != 1 || string(s.Entry.Value) != `"left"` {
				t.Fatalf("state %+v, %v; want version 1 \"left\" (the failed round's committed write)", s, err)
			}
			p.mu.RLock()
			_, remembered := p.overlay[key.String()].requests.find("req-1")
			p.mu.RUnlock()
			if !remembered {
				t.Fatal("the overlay does not remember the committed write's requestId")
			}
		})
	}
}
