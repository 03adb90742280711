package writer

// The second fence seen from a running Writer (fence.go; the fence itself
// is tested in package committer): a writer the group dropped without its
// knowing commits nothing more, although nothing fenced its producer.

import (
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// groupOffset returns the writer group's committed offset of partition
// 0, or -1.
func groupOffset(t *testing.T, w *Writer) int64 {
	t.Helper()
	os, err := w.adm.FetchOffsets(t.Context(), w.cfg.Group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := os.Lookup(w.cfg.Topics.Changes, 0); ok && o.Err == nil {
		return o.At
	}
	return -1
}

// dropUnaware answers w's heartbeats (static instance id instance) in
// place of the broker from now on and removes w from its group: the
// coordinator drops the member, w does not know it.
func dropUnaware(t *testing.T, b *testenv.Broker, w *Writer, instance string) {
	t.Helper()
	b.Cluster.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		hb := req.(*kmsg.HeartbeatRequest)
		if hb.InstanceID == nil || *hb.InstanceID != instance {
			return nil, nil, false
		}
		b.Cluster.KeepControl()
		return hb.ResponseKind(), nil, true
	})
	if _, err := w.adm.LeaveGroup(t.Context(), kadm.LeaveGroup(w.cfg.Group).InstanceIDs(instance)); err != nil {
		t.Fatal(err)
	}
}

// TestWriterCutOffFromItsGroupCannotCommit runs a Writer whose membership
// the group coordinator dropped while the writer does not know it (its
// heartbeats are answered in place of the broker, as for a writer cut off
// from the group coordinator only, or paused past its session). Nothing
// fenced its producer, so only the second fence stops its next write.
func TestWriterCutOffFromItsGroupCannotCommit(t *testing.T) {
	t.Parallel()
	b := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	const instance = "writer-cut-off"
	w := runWriter(t, b, store, Config{InstanceID: instance})
	testenv.WaitFor(t, 30*time.Second, "the writer ready", w.Ready)

	put := func(key string) error {
		k, err := contract.ParseKey(key)
		if err != nil {
			t.Fatal(err)
		}
		_, err = w.Do(t.Context(), &decide.KV{Header: decide.Header{Key: k, Op: contract.OpPut, Principal: "test"}, Value: json.RawMessage(`1`)})
		return err
	}
	if err := put("tenant/t/project/p/before"); err != nil {
		t.Fatalf("write of a member: %v", err)
	}
	end := groupOffset(t, w)
	if end < 1 {
		t.Fatalf("writer group offset %d after a write; want the log end (the fence's offset commit rides in the transaction)", end)
	}
	m, ok := w.groupMember()
	if !ok {
		t.Fatal("the writer is not a member")
	}

	// From now on the writer's heartbeats get a success from here and
	// never reach the group; the coordinator removes its member.
	dropUnaware(t, b, w, instance)
	testenv.WaitFor(t, 20*time.Second, "the member removed", func() bool {
		gs, err := w.adm.DescribeGroups(t.Context(), w.cfg.Group)
		if err != nil {
			t.Fatal(err)
		}
		return len(gs[w.cfg.Group].Members) == 0
	})
	if now, ok := w.groupMember(); !ok || now.Member != m.Member || now.Gen != m.Gen || !w.Ready() {
		t.Fatalf("the writer noticed (member %+v, ready %v); the test needs it unaware", now, w.Ready())
	}

	// Every fence of partition 0's ownership from now on (none is due).
	var refences atomic.Int32
	b.Cluster.ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.Cluster.KeepControl()
		if id := req.(*kmsg.InitProducerIDRequest).TransactionalID; id != nil && *id == w.cfg.TransactionalIDPrefix+"0" {
			refences.Add(1)
		}
		return nil, nil, false
	})

	err := put("tenant/t/project/p/after")
	if contract.ErrorCode(err) != contract.EOutcomeUnknown {
		t.Fatalf("write after removal from the group: %v; want %s", err, contract.EOutcomeUnknown)
	}
	if n := testutil.ToFloat64(w.metrics.rounds.TxnFailures); n != 1 {
		t.Fatalf("%v failed shared transactions; want the refused one", n)
	}
	// The committer replaces its producer after the refused round; the
	// new one's InitProducerID aborts the refused transaction.
	txnID := w.committer.TxnID()
	testenv.WaitFor(t, 30*time.Second, "the refused transaction aborted", func() bool {
		ds, err := w.adm.DescribeTransactions(t.Context(), txnID)
		return err == nil && ds[txnID].State != "Ongoing"
	})
	var keys []string
	for _, rec := range committedRecords(t, w, 0) {
		var e struct{ Key string }
		if json.Unmarshal(rec.Value, &e) == nil {
			keys = append(keys, e.Key)
		}
	}
	if !slices.Equal(keys, []string{"tenant/t/project/p/before"}) {
		t.Fatalf("committed keys %q; want only the write made as a member", keys)
	}
	if got := groupOffset(t, w); got != end {
		t.Fatalf("writer group offset moved from %d to %d", end, got)
	}
	// The refused round restarted the partition's ownership, which waits
	// for a membership other than the refused one before it fences the
	// partition again. This writer's group client never learns it was
	// dropped, so it never fences again: one that did would take the
	// partition from its new owner (chaos seed 1796101726441394891, when
	// the wait ended after a session: every session, for half a minute).
	time.Sleep(2*w.cfg.SessionTimeout + time.Second)
	if n := refences.Load(); n != 0 {
		t.Fatalf("partition 0 fenced %d times by a writer whose refused membership did not change; want none", n)
	}
}
