package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// benchWriter runs a Writer on a fresh broker and database until the
// benchmark ends.
func benchWriter(b *testing.B, partitions int32) *Writer {
	b.Helper()
	br := testenv.MustBroker(b, partitions)
	w, err := New(Config{Brokers: br.Addrs, Topics: br.Topics, SessionTimeout: 6 * time.Second},
		projection.New(testenv.MustPostgres(b)), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("writer: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !w.Ready() {
		if time.Now().After(deadline) {
			b.Fatal("writer not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return w
}

func benchKey(b *testing.B, s string) events.Key {
	k, err := events.ParseKey(s)
	if err != nil {
		b.Fatal(err)
	}
	return k
}

// BenchmarkCASWrite is one client's compare-and-set writes to one key: a
// Kafka transaction each.
func BenchmarkCASWrite(b *testing.B) {
	w := benchWriter(b, 4)
	k := benchKey(b, "tenant/bench/project/p/cas")
	var version int64
	for b.Loop() {
		ev := version
		res, err := w.Do(b.Context(), &Request{Key: k, Op: OpPut, Value: json.RawMessage(`1`), ExpectedVersion: &ev, Principal: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		version = res.Entry.Version
	}
}

// BenchmarkStateOnePartition is 16 concurrent readers of keys of one
// partition: each read confirms ownership with the last stable offset.
func BenchmarkStateOnePartition(b *testing.B) {
	w := benchWriter(b, 4)
	keys := make([]events.Key, 64)
	for i := range keys {
		keys[i] = benchKey(b, fmt.Sprintf("tenant/bench/project/p/k%d", i))
		if _, err := w.Do(b.Context(), &Request{Key: keys[i], Op: OpPut, Value: json.RawMessage(`1`), Principal: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0))) // 16 readers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := w.State(context.Background(), keys[i%len(keys)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}
