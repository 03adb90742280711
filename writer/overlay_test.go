package writer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestSubmitRefusesWhenOverlayFull: with the projector down the overlay
// holds every new change; at MaxOverlay keys writes answer 503 (reads
// are unaffected) and resume once the projector caught up.
func TestSubmitRefusesWhenOverlayFull(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t, Config{
		Topics:     changelog.Topics{Changes: "c", Conflicts: "x", Partitions: 1},
		MaxOverlay: 2,
	})
	p := newPartition(w, 0)
	p.setReady(true, 1, map[string]overlayEntry{"a": {offset: 10}})
	submit := func() error { return p.submit(&call{cmd: &decide.KV{}, done: make(chan answer, 1)}) }

	if err := submit(); err != nil {
		t.Fatalf("overlay below the limit: %v", err)
	}
	p.mu.Lock()
	p.overlay["b"] = overlayEntry{offset: 11}
	p.mu.Unlock()
	err := submit()
	if contract.ErrorCode(err) != contract.EUnavailable || !strings.Contains(err.Error(), "projector") {
		t.Fatalf("overlay at the limit: %v", err)
	}
	if _, ok, ready := p.lookup("a"); !ok || !ready {
		t.Fatal("reads must go on while writes wait for the projector")
	}
	p.trim(11) // the projector applied offset 10
	if err := submit(); err != nil {
		t.Fatalf("after the projector caught up: %v", err)
	}
}

// TestCatchUpHoldsAtMostTwiceMaxOverlay: a catch-up keeps in memory the
// keys the projection does not hold yet. When more keys changed since the
// projector's offset than a writer of this configuration lets pile up
// (records produced around the writers, a projection restored behind the
// log), it gives up at twice MaxOverlay instead of reading them all (the
// 11-million-key figure 23 took a writer to 6 GB), and catches up once
// the projector is closer.
func TestCatchUpHoldsAtMostTwiceMaxOverlay(t *testing.T) {
	t.Parallel()
	b := testenv.MustBroker(t, 1)
	db := testenv.MustPostgres(t)
	w, err := New(Config{Brokers: b.Addrs, Topics: b.Topics, MaxOverlay: 3}, projection.New(db), discard, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.admCl.Close)
	produceUnprojected(t, b, 7) // offsets 0-6, the commit marker at 7
	p := newPartition(w, 0)

	_, _, err = p.catchUp(t.Context())
	if !errors.Is(err, errProjectorBehind) || !strings.Contains(err.Error(), "more than 6 keys of partition 0 changed between the projector's offset 0") {
		t.Fatalf("7 keys unprojected, MaxOverlay 3: %v; want errProjectorBehind past 6 keys", err)
	}
	// The projector applied offsets 0 and 1: 5 keys are left to hold.
	if _, err := db.Exec(t.Context(), `INSERT INTO projector_offsets (topic, partition, next_offset) VALUES ($1, 0, 2)`, b.Topics.Changes); err != nil {
		t.Fatal(err)
	}
	overlay, end, err := p.catchUp(t.Context())
	if err != nil || len(overlay) != 5 || end != 8 {
		t.Fatalf("5 keys unprojected: %d keys to %d, %v; want 5 to 8", len(overlay), end, err)
	}
}

// TestPartitionServesAgainOnceTheProjectorIsCloser: a running writer
// whose partition's catch-up gave up (errProjectorBehind) does not serve
// it meanwhile, and serves it by itself once the projector has applied
// enough: run retries the ownership, no restart needed.
func TestPartitionServesAgainOnceTheProjectorIsCloser(t *testing.T) {
	t.Parallel()
	b := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	applied := produceUnprojected(t, b, 7) // offsets 0-6, the commit marker at 7
	w := runWriter(t, b, store, Config{InstanceID: "behind", MaxOverlay: 3})
	key := mustKey(t, "tenant/t/project/p/k6")

	testenv.WaitFor(t, 30*time.Second, "the writer assigned the partition", func() bool { return len(w.owned()) == 1 })
	time.Sleep(2 * time.Second) // a catch-up or two, each giving up
	if w.Ready() {
		t.Fatal("ready with 7 keys unprojected and MaxOverlay 3; want the partition held until the projector is closer")
	}
	if _, err := w.State(t.Context(), key); contract.ErrorCode(err) != contract.EUnavailable {
		t.Fatalf("a read meanwhile: %v; want unavailable", err)
	}
	// The projector applies offsets 0 and 1: 5 keys are left, within
	// twice MaxOverlay.
	if err := store.Apply(t.Context(), b.Topics.Changes, applied[:2]); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "the partition serving again", w.Ready)
	st, err := w.State(t.Context(), key)
	if err != nil || st.Entry.Version != 1 || string(st.Entry.Value) != "6" {
		t.Fatalf("k6 from the overlay: %+v, %v; want version 1, value 6", st.Entry, err)
	}
}

// produceUnprojected produces n puts of keys k0… of one project to b's
// partition 0, k<i> = i, and returns them as the projector would apply
// them (offsets 0 to n-1).
func produceUnprojected(t *testing.T, b *testenv.Broker, n int) []projection.Applied {
	t.Helper()
	now := time.Now().UTC()
	evs := make([]any, n)
	applied := make([]projection.Applied, n)
	for i := range n {
		ev := contract.Event{SchemaVersion: contract.SchemaVersion, Key: fmt.Sprintf("tenant/t/project/p/k%d", i), Scope: "tenant/t/project/p",
			Version: 1, Kind: contract.KindPut, Op: contract.OpSet, After: json.RawMessage(fmt.Sprint(i)), CreatedAt: now, TS: now, Principal: "test"}
		evs[i], applied[i] = ev, projection.Applied{Partition: 0, Offset: int64(i), Event: ev}
	}
	testenv.MustProduce(t, b, evs...)
	return applied
}
