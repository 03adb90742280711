package writer

import (
	"context"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
)

// TestUnprojected: a listing waits for the highest offset among the
// overlay's entries under its prefix, whatever their state (a delete must
// be projected as much as a put), and for nothing when none is.
func TestUnprojected(t *testing.T) {
	t.Parallel()
	overlay := map[string]overlayEntry{
		"tenant/a/project/p/apple":  {offset: 4, state: keystate.State{Live: true}},
		"tenant/a/project/p/banana": {offset: 9}, // deleted
		"tenant/a/project/p/b/c":    {offset: 7},
		"tenant/a/project/q/apple":  {offset: 12},
	}
	tests := []struct {
		name   string
		prefix string
		want   int64
	}{
		{"HighestUnderScope", "tenant/a/project/p/", 9},
		{"DeleteCounts", "tenant/a/project/p/ban", 9},
		{"OnlyUnderPrefix", "tenant/a/project/p/b/", 7},
		{"OneKey", "tenant/a/project/p/apple", 4},
		{"NoneUnderPrefix", "tenant/a/project/p/zebra", -1},
		{"NotAnotherProject", "tenant/a/project/r/", -1},
	}
	w := offlineWriter(t, Config{})
	p := newPartition(w, 0)
	if _, ready := p.unprojected("tenant/a/project/p/"); ready {
		t.Fatal("a partition not caught up must not answer")
	}
	p.setReady(true, 1, overlay)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ready := p.unprojected(tc.prefix)
			if !ready || got != tc.want {
				t.Errorf("unprojected(%q) = %d, %v; want %d, true", tc.prefix, got, ready, tc.want)
			}
		})
	}
}

// TestAwaitProjected on kfake and Postgres: with the projector down, a
// listing of a prefix holding an acknowledged write waits MaxListWait and
// answers unavailable, while one of a prefix without unprojected writes
// answers at once; a listing waiting when the projector starts returns as
// soon as the write is projected, and the projection then holds it.
func TestAwaitProjected(t *testing.T) {
	t.Parallel()
	b := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgresDB(t).Pool)
	w := runWriter(t, b, store, Config{MaxListWait: 300 * time.Millisecond})
	testenv.WaitFor(t, 30*time.Second, "writer ready", w.Ready)
	ctx := t.Context()

	k := mustKey(t, "tenant/a/project/p/apple")
	if _, err := w.Do(ctx, &decide.KV{Header: decide.Header{Key: k, Op: contract.OpPut}, Value: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	_, err := w.AwaitProjected(ctx, "tenant/a/project/p/")
	if contract.ErrorCode(err) != contract.EUnavailable {
		t.Fatalf("projector down: %v; want unavailable", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("answered after %v, before MaxListWait", d)
	}
	var m dto.Metric
	if err := w.metrics.listWaitTimeouts.Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		t.Errorf("timeouts counted %v (%v); want 1", m.GetCounter().GetValue(), err)
	}
	if _, err := w.AwaitProjected(ctx, "tenant/a/project/p/zebra"); err != nil {
		t.Fatalf("a prefix without unprojected writes: %v", err)
	}

	w.cfg.MaxListWait = 30 * time.Second // the projector starts below
	waited := make(chan error, 1)
	go func() {
		_, err := w.AwaitProjected(ctx, "tenant/a/project/p/")
		waited <- err
	}()
	pr, err := projector.New(projector.Config{Brokers: b.Addrs, Topic: b.Topics.Changes, Partitions: b.Topics.Partitions}, store, discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunUntilCleanup(t, "projector", pr.Run)
	if err := <-waited; err != nil {
		t.Fatalf("with the projector running: %v", err)
	}
	items, _, err := store.List(context.Background(), "tenant/a/project/p/", projection.Page{Limit: 10, MaxBytes: 1 << 20, Now: time.Now()})
	if err != nil || len(items) != 1 || items[0].Key != k.String() {
		t.Fatalf("listing after the wait: %+v, %v; want %s", items, err, k)
	}
	if _, p := w.partition(k); p == nil {
		t.Fatal("the partition is no longer owned")
	} else {
		p.mu.RLock()
		_, in := p.overlay[k.String()]
		p.mu.RUnlock()
		if in {
			t.Error("the overlay still holds an entry the projection was seen to hold")
		}
	}
}

// TestUnprojectedUpTo: a read at an offset waits for the overlay's
// entries under its prefix up to that offset, and for the offset itself
// when an entry past it may hide older unprojected events of its key.
func TestUnprojectedUpTo(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t, Config{})
	p := newPartition(w, 0)
	p.setReady(true, 1, map[string]overlayEntry{
		"tenant/a/project/p/apple":  {offset: 4},
		"tenant/a/project/p/banana": {offset: 9},
		"tenant/a/project/q/apple":  {offset: 12},
	})
	p.end = 11
	for _, tc := range []struct {
		prefix string
		offset int64
		want   int64
	}{
		{"tenant/a/project/p/", 10, 9}, {"tenant/a/project/p/", 6, 6}, {"tenant/a/project/p/", 3, 3},
		{"tenant/a/project/p/apple", 6, 4}, {"tenant/a/project/p/zebra", 6, -1},
	} {
		got, end, ready := p.unprojectedUpTo(tc.prefix, tc.offset)
		if !ready || got != tc.want || end != 11 {
			t.Errorf("unprojectedUpTo(%q, %d) = %d, %d, %v; want %d, 11, true", tc.prefix, tc.offset, got, end, ready, tc.want)
		}
	}
}

// TestAwaitPosition on kfake and Postgres: a read at a position of
// another partition than its prefix's, or past the end of the log, is
// invalid on at; one at the last write waits for the projector (here
// down: unavailable after MaxListWait), one before it does not wait.
func TestAwaitPosition(t *testing.T) {
	t.Parallel()
	b := testenv.MustBroker(t, 2)
	store := projection.New(testenv.MustPostgresDB(t).Pool)
	w := runWriter(t, b, store, Config{MaxListWait: 200 * time.Millisecond})
	testenv.WaitFor(t, 30*time.Second, "writer ready", w.Ready)
	ctx := t.Context()
	const prefix = "tenant/a/project/p/"
	k := mustKey(t, prefix+"apple")
	res, err := w.Do(ctx, &decide.KV{Header: decide.Header{Key: k, Op: contract.OpPut}, Value: []byte(`1`)})
	if err != nil {
		t.Fatal(err)
	}
	id := w.PartitionOf(prefix)
	var at int64 = -2
	if _, p := w.partition(k); p != nil {
		p.mu.RLock()
		at = p.overlay[k.String()].offset
		p.mu.RUnlock()
	}
	if at < 0 || res.Entry.Version != 1 {
		t.Fatalf("the write's offset: %d", at)
	}
	for _, c := range []contract.Cursor{{Partition: 1 - id, Offset: 0}, {Partition: id, Offset: at + 100}} {
		var ce *contract.Error
		if err := w.AwaitPosition(ctx, prefix, c); !errors.As(err, &ce) || ce.Code != contract.EInvalid || ce.Field != "at" {
			t.Errorf("AwaitPosition(%s): %v; want invalid on at", c, err)
		}
	}
	if err := w.AwaitPosition(ctx, prefix, contract.Cursor{Partition: id, Offset: at}); contract.ErrorCode(err) != contract.EUnavailable {
		t.Errorf("at the unprojected write: %v; want unavailable", err)
	}
	if err := w.AwaitPosition(ctx, prefix, contract.Cursor{Partition: id, Offset: at - 1}); err != nil {
		t.Errorf("before the unprojected write: %v", err)
	}
}
