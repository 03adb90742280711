package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/testenv"
)

// Tests of reads confirmed by the next round's fence (partition.confirm,
// committer.AwaitFence) instead of a last-stable-offset request.

// fenceWaiting returns the number of reads waiting for a round's fence.
func fenceWaiting(w *Writer) int {
	return w.committer.FenceWaiters()
}

// confirmRig is a writer with two partitions whose first round (a write to
// partition 0) is held at its EndTxn, its fence already accepted, and a
// read of partition read waiting for the next round's fence.
type confirmRig struct {
	w            *Writer
	b            *testenv.Broker
	keys         []contract.Key
	release      func()
	first, read  chan error
	fence0, lso0 float64
}

func newConfirmRig(t *testing.T, read int, before func(b *testenv.Broker, w *Writer)) *confirmRig {
	t.Helper()
	const parts = 2
	// Without read leases: the read right after an accepted fence would
	// be confirmed by the lease (lease_test.go).
	b, w := readyWriterWith(t, parts, Config{ReadLease: -1})
	r := &confirmRig{w: w, b: b, keys: keysByPartition(t, parts), first: make(chan error, 1), read: make(chan error, 1)}
	if before != nil {
		before(b, w)
	}
	held, release := holdFirstEndTxn(b, w)
	t.Cleanup(release)
	r.release = release
	go func() { r.first <- putKey(t.Context(), w, r.keys[0], "first") }()
	<-held
	r.fence0, r.lso0 = testutil.ToFloat64(w.metrics.confirmFence), testutil.ToFloat64(w.metrics.confirmLSO)
	go func() {
		_, err := w.State(t.Context(), r.keys[read])
		r.read <- err
	}()
	testenv.WaitFor(t, 20*time.Second, "the read waiting for a fence", func() bool { return fenceWaiting(w) == 1 })
	return r
}

// confirmed returns how many reads each way confirmed since the rig's
// read started.
func (r *confirmRig) confirmed() (fence, lso float64) {
	return testutil.ToFloat64(r.w.metrics.confirmFence) - r.fence0, testutil.ToFloat64(r.w.metrics.confirmLSO) - r.lso0
}

func (r *confirmRig) finish(t *testing.T) {
	t.Helper()
	if err := <-r.first; err != nil {
		t.Fatalf("the held round's write: %v", err)
	}
	if err := <-r.read; err != nil {
		t.Fatalf("the read: %v", err)
	}
}

// nextRound queues a write of partition 1 for the next round, releases
// the held one, and returns the write's error once both ended.
func (r *confirmRig) nextRound(t *testing.T) error {
	t.Helper()
	second := make(chan error, 1)
	go func() { second <- putKey(context.Background(), r.w, r.keys[1], "second") }()
	awaitQueued(t, r.w, 1)
	r.release()
	r.finish(t)
	return <-second
}

// want checks how many times the rig's read was confirmed each way.
func (r *confirmRig) want(t *testing.T, fence, lso float64) {
	t.Helper()
	if f, l := r.confirmed(); f != fence || l != lso {
		t.Fatalf("read confirmed %v times by a fence and %v by a last stable offset; want %v and %v", f, l, fence, lso)
	}
}

func TestReadConfirmedByNextRoundsFence(t *testing.T) {
	t.Parallel()
	r := newConfirmRig(t, 1, nil)
	if err := r.nextRound(t); err != nil {
		t.Fatalf("the next round's write: %v", err)
	}
	r.want(t, 1, 0)
}

func TestReadAsksBrokersWhenNoRoundFollows(t *testing.T) {
	t.Parallel()
	r := newConfirmRig(t, 1, nil)
	r.release() // no submission queued: the committer goes idle
	r.finish(t)
	r.want(t, 0, 1)
	if n := fenceWaiting(r.w); n != 0 {
		t.Fatalf("%d reads still wait for a fence", n)
	}
}

// TestReadNotConfirmedByRefusedFence: the next round's TxnOffsetCommit is
// refused (the group moved on, as the coordinator sees it): the read
// confirms with the brokers instead.
func TestReadNotConfirmedByRefusedFence(t *testing.T) {
	t.Parallel()
	var refuse func()
	r := newConfirmRig(t, 0, func(b *testenv.Broker, _ *Writer) { refuse = refuseFences(b) })
	refuse()
	// The read (partition 0) succeeds: partition 0 was not in the
	// refused round, so it is still owned.
	if err := r.nextRound(t); contract.ErrorCode(err) != contract.EOutcomeUnknown {
		t.Fatalf("the refused round's write: %v; want %s", err, contract.EOutcomeUnknown)
	}
	r.want(t, 0, 1)
}

// TestReadNotConfirmedAcrossOwnerships: an accepted fence proves nothing
// to a read whose ownership of the partition ended meanwhile (here: its
// epoch moved, as a new ownership's would); the read confirms with the
// brokers instead.
func TestReadNotConfirmedAcrossOwnerships(t *testing.T) {
	t.Parallel()
	r := newConfirmRig(t, 1, nil)
	r.w.mu.RLock()
	p := r.w.parts[1]
	r.w.mu.RUnlock()
	p.mu.Lock()
	p.epoch++
	p.mu.Unlock()
	if err := r.nextRound(t); err != nil {
		t.Fatalf("the next round's write: %v", err)
	}
	r.want(t, 0, 1)
}

// TestAnswerWithoutRecordsIsConfirmed: a decision that appends nothing,
// neither an event nor a conflict record (here a touch of a key this
// owner thinks absent: not_found), is a read of the partition's state and
// is confirmed like one before it is answered. A writer another writer
// superseded answers partition_unavailable and gives the partition up,
// never its stale not_found (chaos seed 1796103495245593476: a writer that
// had lost its partition answered from its stale overlay).
func TestAnswerWithoutRecordsIsConfirmed(t *testing.T) {
	t.Parallel()
	// Without read leases: the other writer below is a bare produce,
	// which does not wait out this writer's lease as an owner would.
	b, w := readyWriterWith(t, 1, Config{ReadLease: -1})
	if err := putKey(t.Context(), w, mustKey(t, "tenant/t/project/p/before"), "v"); err != nil {
		t.Fatal(err)
	}
	key := mustKey(t, "tenant/t/project/p/created-elsewhere")
	_, p := w.partition(key)
	p.mu.RLock()
	epoch := p.epoch
	p.mu.RUnlock()
	testenv.MustProduce(t, b, contract.Event{Key: key.String(), Scope: key.Scope(), Version: 1, Kind: contract.KindPut, Op: contract.OpPut,
		After: json.RawMessage(`"elsewhere"`), Before: json.RawMessage(`null`), TS: time.Now().UTC(), WriterEpoch: epoch + 1,
		Semantics: contract.Semantics{Purpose: "other"}})

	_, err := w.Do(t.Context(), &decide.KV{Header: decide.Header{Key: key, Op: contract.OpTouch, Principal: "test"}})
	if code := contract.ErrorCode(err); code != contract.EUnavailable {
		t.Fatalf("touch of a key another writer created: %v (%s); want %s", err, code, contract.EUnavailable)
	}
	p.mu.RLock()
	ready := p.ready
	p.mu.RUnlock()
	if ready {
		t.Fatal("the superseded partition is still ready")
	}
}

// refuseFences makes the broker refuse every TxnOffsetCommit (the group
// moved on, as the coordinator sees it) once arm is called.
func refuseFences(b *testenv.Broker) (arm func()) {
	armed := make(chan struct{})
	b.Cluster.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case <-armed:
		default:
			return nil, nil, false
		}
		creq := req.(*kmsg.TxnOffsetCommitRequest)
		resp := creq.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range creq.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.IllegalGeneration.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	var once sync.Once
	return func() { once.Do(func() { close(armed) }) }
}

// TestRefusedRoundAnswersNoUnconfirmedState: in a round whose fence the
// group coordinator refused, a decision that appended nothing (a touch of
// a key the owner thinks absent) was decided on a state nothing
// confirmed: it is answered partition_unavailable, not not_found.
func TestRefusedRoundAnswersNoUnconfirmedState(t *testing.T) {
	t.Parallel()
	b, w := readyWriterWith(t, 1, Config{ReadLease: -1})
	refuse := refuseFences(b)
	held, release := holdFirstEndTxn(b, w)
	t.Cleanup(release)
	first := make(chan error, 1)
	go func() { first <- putKey(t.Context(), w, mustKey(t, "tenant/t/project/p/first"), "v") }()
	<-held
	// Behind the held round, one batch: a write and a touch.
	put, touch := make(chan error, 1), make(chan error, 1)
	go func() { put <- putKey(t.Context(), w, mustKey(t, "tenant/t/project/p/second"), "v") }()
	go func() {
		_, err := w.Do(t.Context(), &decide.KV{Header: decide.Header{Key: mustKey(t, "tenant/t/project/p/absent"), Op: contract.OpTouch, Principal: "test"}})
		touch <- err
	}()
	_, p := w.partition(mustKey(t, "tenant/t/project/p/absent"))
	testenv.WaitFor(t, 20*time.Second, "two calls queued", func() bool { return len(p.calls) == 2 })
	refuse()
	release()
	if err := <-first; err != nil {
		t.Fatalf("the held round's write: %v", err)
	}
	if err := <-put; contract.ErrorCode(err) != contract.EOutcomeUnknown {
		t.Fatalf("the refused round's write: %v; want %s", err, contract.EOutcomeUnknown)
	}
	if err := <-touch; contract.ErrorCode(err) != contract.EUnavailable {
		t.Fatalf("the refused round's touch: %v (%s); want %s", err, contract.ErrorCode(err), contract.EUnavailable)
	}
}

// TestGivenUpPartitionDecidesNothing: once a read's confirmation gave
// the partition up (confirm found records past its end: another writer's,
// as far as it can tell), its overlay and state cache are gone, and the
// partition goroutine, still draining its queue, must not decide on what
// is left — the projection, which lags the log. Here the projection
// never saw the key's first version (no projector runs): deciding a
// create on it would append a second version 1 over the first.
func TestGivenUpPartitionDecidesNothing(t *testing.T) {
	t.Parallel()
	b, w := readyWriter(t, 1)
	key := mustKey(t, "tenant/t/project/p/created")
	if err := putKey(t.Context(), w, key, "first"); err != nil {
		t.Fatal(err)
	}
	_, p := w.partition(key)
	// A round in flight, and behind it, queued, a create of the key.
	held, release := holdFirstEndTxn(b, w)
	t.Cleanup(release)
	other := make(chan error, 1)
	go func() { other <- putKey(t.Context(), w, mustKey(t, "tenant/t/project/p/other"), "v") }()
	<-held
	created := make(chan error, 1)
	go func() {
		zero := int64(0)
		_, err := w.Do(t.Context(), &decide.KV{Header: decide.Header{Key: key, Op: contract.OpPut, Principal: "test"},
			Value: json.RawMessage(`"second"`), ExpectedVersion: &zero})
		created <- err
	}()
	testenv.WaitFor(t, 20*time.Second, "the create queued", func() bool { return len(p.calls) == 1 })
	p.setReady(false, 0, nil) // as confirm does when it gives the partition up
	release()
	if err := <-other; err != nil {
		t.Fatalf("the held round's write: %v", err)
	}
	if err := <-created; contract.ErrorCode(err) != contract.EUnavailable {
		t.Fatalf("create of a key the given-up partition created: %v (%s); want %s", err, contract.ErrorCode(err), contract.EUnavailable)
	}
}

// TestReadWaitsForOwnRoundInFlight: a round of this partition's own can
// be visible at the brokers (the last stable offset past end) before its
// commit returns and moves end; a read confirming meanwhile waits for it
// instead of concluding that another writer wrote and giving the
// partition up.
func TestReadWaitsForOwnRoundInFlight(t *testing.T) {
	t.Parallel()
	_, w := readyWriterWith(t, 1, Config{ReadLease: -1})
	key := mustKey(t, "tenant/t/project/p/k")
	if err := putKey(t.Context(), w, key, "v"); err != nil {
		t.Fatal(err)
	}
	_, p := w.partition(key)
	// As between the brokers' commit of the round and its return here:
	// end before the round's records and marker, the round in flight.
	p.mu.Lock()
	landedEnd := p.end
	p.end -= 2
	p.mu.Unlock()
	landed := p.inFlight()
	read := make(chan error, 1)
	go func() {
		_, err := w.State(t.Context(), key)
		read <- err
	}()
	// Longer than confirm looks again for its own commit to appear.
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-read:
		t.Fatalf("the read answered (%v) before the round in flight landed", err)
	default:
	}
	p.mu.Lock()
	p.end = landedEnd
	p.mu.Unlock()
	landed()
	if err := <-read; err != nil {
		t.Fatalf("the read: %v", err)
	}
	if !p.isReady() {
		t.Fatal("the partition was given up for its own round")
	}
}

// TestReadNotGivenUpByAbortedRecords: records past end that no
// transaction committed — a writer the group dropped produced into its
// shared transaction, and its refused fence got it aborted — are nobody's
// write: a read confirms past them and the partition stays owned.
func TestReadNotGivenUpByAbortedRecords(t *testing.T) {
	t.Parallel()
	b, w := readyWriterWith(t, 1, Config{ReadLease: -1})
	key := mustKey(t, "tenant/t/project/p/k")
	if err := putKey(t.Context(), w, key, "v"); err != nil {
		t.Fatal(err)
	}
	_, p := w.partition(key)
	p.mu.RLock()
	epoch := p.epoch
	p.mu.RUnlock()
	testenv.MustProducer(t, b).Abort(t, contract.Event{Key: key.String(), Scope: key.Scope(), Version: 2, Kind: contract.KindPut, Op: contract.OpPut,
		After: json.RawMessage(`"zombie"`), Before: json.RawMessage(`"v"`), TS: time.Now().UTC(), WriterEpoch: epoch - 1,
		Semantics: contract.Semantics{Purpose: "other"}})
	s, err := w.State(t.Context(), key)
	if err != nil || string(s.Entry.Value) != `"v"` {
		t.Fatalf("read past an aborted record: %s, %v; want \"v\"", s.Entry.Value, err)
	}
	if !p.isReady() {
		t.Fatal("the partition was given up for an aborted record")
	}
	// A committed record of another writer past end still gives it up.
	testenv.MustProduce(t, b, contract.Event{Key: key.String(), Scope: key.Scope(), Version: 2, Kind: contract.KindPut, Op: contract.OpPut,
		After: json.RawMessage(`"other"`), Before: json.RawMessage(`"v"`), TS: time.Now().UTC(), WriterEpoch: epoch + 1,
		Semantics: contract.Semantics{Purpose: "other"}})
	if _, err := w.State(t.Context(), key); contract.ErrorCode(err) != contract.EUnavailable {
		t.Fatalf("read past another writer's committed record: %v; want %s", err, contract.EUnavailable)
	}
	if p.isReady() {
		t.Fatal("the partition is still ready past another writer's committed record")
	}
}

// TestConfirmScansForeignRecordsOnceAndSmall: reads that find records
// past end look for a committed one with one small read of the log at a
// time, not each with fetches of 16 MiB that decode every record in
// them: figure 23's reads of 10 million keys produced around the writer
// took it past a gigabyte. Not parallel: it counts the process's
// allocations.
func TestConfirmScansForeignRecordsOnceAndSmall(t *testing.T) {
	b, w := readyWriterWith(t, 1, Config{ReadLease: -1})
	key := keysByPartition(t, 1)[0]
	now := time.Now().UTC()
	big := json.RawMessage(`"` + strings.Repeat("v", 4<<10) + `"`)
	var evs []any
	for i := range 4000 { // 16 MiB of another producer's records past end
		evs = append(evs, contract.Event{SchemaVersion: contract.SchemaVersion, Key: fmt.Sprintf("%s-%d", key, i), Scope: key.Scope(),
			Version: 1, Kind: contract.KindPut, Op: contract.OpSet, After: big, CreatedAt: now, TS: now, Principal: "test"})
	}
	testenv.MustProduce(t, b, evs...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := w.State(t.Context(), key); contract.ErrorCode(err) != contract.EUnavailable {
				t.Errorf("a read past another writer's records: %v; want unavailable", err)
			}
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	d := after.TotalAlloc - before.TotalAlloc
	t.Logf("8 reads past another producer's 16 MiB allocated %d KiB", d>>10)
	if d > 24<<20 {
		t.Errorf("8 reads allocated %d MiB looking past end; want one small read (a batch of about 1 MiB)", d>>20)
	}
}
