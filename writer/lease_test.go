package writer

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// Tests of read leases (lease.go).

// confirms returns the reads confirmed by lease, fence and ListOffsets.
func confirms(w *Writer) [3]float64 {
	return [3]float64{testutil.ToFloat64(w.metrics.confirmLease), testutil.ToFloat64(w.metrics.confirmFence), testutil.ToFloat64(w.metrics.confirmLSO)}
}

// wantConfirms fails t unless the reads confirmed since before (a
// confirms result) are lease, fence and lso.
func wantConfirms(t *testing.T, w *Writer, before [3]float64, lease, fence, lso float64) {
	t.Helper()
	now := confirms(w)
	if got := [3]float64{now[0] - before[0], now[1] - before[1], now[2] - before[2]}; got != [3]float64{lease, fence, lso} {
		t.Fatalf("reads confirmed by lease, fence, ListOffsets: %v; want %v", got, [3]float64{lease, fence, lso})
	}
}

// TestReadConfirmedByLease: right after a round, reads of every partition
// ready before its fence was sent are confirmed without a wait or a
// request, and see the round's write.
func TestReadConfirmedByLease(t *testing.T) {
	_, w := readyWriterWith(t, 2, Config{ReadLease: 2 * time.Second})
	keys := keysByPartition(t, 2)
	if err := putKey(t.Context(), w, keys[0], "leased"); err != nil {
		t.Fatal(err)
	}
	before := confirms(w)
	for i, k := range keys {
		s, err := w.State(t.Context(), k)
		if err != nil {
			t.Fatalf("read of partition %d: %v", i, err)
		}
		if i == 0 && string(s.Entry.Value) != `"leased"` {
			t.Fatalf("read %s; want the acknowledged write", s.Entry.Value)
		}
	}
	wantConfirms(t, w, before, 2, 0, 0)
}

// TestReadLeaseExpires: once ReadLease has passed since the last accepted
// fence was sent, a read asks the brokers (no round under way).
func TestReadLeaseExpires(t *testing.T) {
	const lease = 300 * time.Millisecond
	_, w := readyWriterWith(t, 1, Config{ReadLease: lease})
	k := keysByPartition(t, 1)[0]
	if err := putKey(t.Context(), w, k, "v"); err != nil {
		t.Fatal(err)
	}
	sent := w.committer.LeaseSent()
	if sent == 0 {
		t.Fatal("no lease after an acknowledged write")
	}
	testenv.WaitFor(t, 10*time.Second, "the lease run out", func() bool { return leaseNow() >= sent+int64(lease) })
	before := confirms(w)
	if _, err := w.State(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	wantConfirms(t, w, before, 0, 0, 1)
}

// TestReadLeaseNotAcrossOwnerships: a fence sent before the partition's
// ownership became ready proves nothing about that ownership.
func TestReadLeaseNotAcrossOwnerships(t *testing.T) {
	_, w := readyWriterWith(t, 1, Config{ReadLease: 2 * time.Second})
	k := keysByPartition(t, 1)[0]
	if err := putKey(t.Context(), w, k, "v"); err != nil {
		t.Fatal(err)
	}
	w.mu.RLock()
	p := w.parts[0]
	w.mu.RUnlock()
	p.mu.Lock()
	p.readySince = leaseNow() // as a later ownership's start would
	p.mu.Unlock()
	before := confirms(w)
	if _, err := w.State(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	wantConfirms(t, w, before, 0, 0, 1)
}

// TestTakeoverWaitsOutReadLease: the group drops a writer that does not
// know it (its heartbeats are answered in place of the broker, as for a
// writer cut off from the coordinator or whose static instance id a new
// process took) while its lease runs; another writer takes the partition.
// The new owner acknowledges nothing before the old one's lease ended,
// so the old writer's read after that write cannot be confirmed by the
// lease and answer the value it overwrote. Without the new owner's wait
// (awaitLeases) it would: the takeover takes well under the lease here.
func TestTakeoverWaitsOutReadLease(t *testing.T) {
	const lease = 3 * time.Second
	takeover(t, lease, Config{ReadLease: lease})
}

// TestTakeoverWaitsWithLeasesOff: a writer with leases off still waits
// out the default lease after taking a partition, so that turning leases
// off (or on) one writer at a time never leaves a window where a writer
// that does not wait succeeds one that serves reads under its lease.
func TestTakeoverWaitsWithLeasesOff(t *testing.T) {
	takeover(t, DefaultReadLease, Config{ReadLease: -1})
}

// takeover drops a writer with lease lease unaware and lets a writer of
// config neuCfg take its partition and write; it fails if the new owner
// acknowledged the write within the old one's lease, or if the old one
// then confirmed a read by its lease.
func takeover(t *testing.T, lease time.Duration, neuCfg Config) {
	t.Helper()
	b := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	const instance = "writer-leased"
	old := runWriter(t, b, store, Config{InstanceID: instance, ReadLease: lease})
	testenv.WaitFor(t, 30*time.Second, "the first writer ready", func() bool { return old.Ready() && len(old.owned()) == 1 })
	k := keysByPartition(t, 1)[0]
	if err := putKey(t.Context(), old, k, "old"); err != nil {
		t.Fatal(err)
	}
	sent := old.committer.LeaseSent()

	dropUnaware(t, b, old, instance)
	neuCfg.InstanceID = "writer-new"
	neu := runWriter(t, b, store, neuCfg)
	testenv.WaitFor(t, 30*time.Second, "the new writer ready", func() bool { return neu.Ready() && len(neu.owned()) == 1 })
	if err := putKey(t.Context(), neu, k, "new"); err != nil {
		t.Fatalf("write through the new owner: %v", err)
	}
	acked := leaseNow()
	if !old.Ready() {
		t.Fatal("the old writer noticed it was dropped; the test needs it unaware")
	}
	if d := time.Duration(acked - sent); d < lease {
		t.Fatalf("the new owner acknowledged a write %v after the old owner's last fence was sent, within its %v lease", d, lease)
	}
	before := confirms(old)
	s, err := old.State(t.Context(), k)
	if err == nil && string(s.Entry.Value) != `"new"` {
		t.Fatalf("the old writer read %s after the new owner acknowledged \"new\"", s.Entry.Value)
	}
	if confirms(old)[0] != before[0] {
		t.Fatal("the old writer confirmed a read by a lease that had ended")
	}
	if contract.ErrorCode(err) != contract.EUnavailable {
		t.Fatalf("the old writer's read: %v, %s; want %s (another writer appended)", err, s.Entry.Value, contract.EUnavailable)
	}
}
