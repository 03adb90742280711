package writer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// benchWriter runs a Writer on a fresh broker and database until the
// benchmark ends.
func benchWriter(b *testing.B, partitions int32) *Writer {
	b.Helper()
	w := runWriter(b, testenv.MustBroker(b, partitions), projection.New(testenv.MustPostgres(b)), Config{})
	testenv.WaitFor(b, 30*time.Second, "writer ready", w.Ready)
	return w
}

func benchKey(b *testing.B, s string) contract.Key {
	k, err := contract.ParseKey(s)
	if err != nil {
		b.Fatal(err)
	}
	return k
}

// BenchmarkCASWrite is one client's compare-and-set writes to one key: a
// Kafka transaction each. WithRequestID gives each write a new requestId:
// the key was created in the overlay (no projector runs), which then
// remembers the ids of all its versions, so no write asks kv_history
// (overlayEntry.complete). A key whose older versions are projected asks
// it once per batch: about +0.4 ms per batch on the dev machine.
func BenchmarkCASWrite(b *testing.B) {
	for _, withID := range []bool{false, true} {
		b.Run(map[bool]string{false: "NoRequestID", true: "WithRequestID"}[withID], func(b *testing.B) {
			w := benchWriter(b, 4)
			k := benchKey(b, "tenant/bench/project/p/cas")
			var version int64
			for b.Loop() {
				ev := version
				r := &decide.KV{Header: decide.Header{Key: k, Op: contract.OpPut, Principal: "bench"}, Value: json.RawMessage(`1`), ExpectedVersion: &ev}
				if withID {
					r.RequestID = fmt.Sprintf("req-%d", ev)
				}
				res, err := w.Do(b.Context(), r)
				if err != nil {
					b.Fatal(err)
				}
				version = res.Entry.Version
			}
		})
	}
}

// BenchmarkStateOnePartition is 16 concurrent readers of keys of one
// partition: each read confirms ownership with the last stable offset.
func BenchmarkStateOnePartition(b *testing.B) {
	w := benchWriter(b, 4)
	keys := make([]contract.Key, 64)
	for i := range keys {
		keys[i] = benchKey(b, fmt.Sprintf("tenant/bench/project/p/k%d", i))
		if _, err := w.Do(b.Context(), &decide.KV{Header: decide.Header{Key: keys[i], Op: contract.OpPut, Principal: "bench"}, Value: json.RawMessage(`1`)}); err != nil {
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

// BenchmarkWriteLog is the per-write INFO line through a JSON handler (as
// the services log): typed is logWrite (slog.LogAttrs), untyped the
// []any form it replaced, whose contract.Kind and contract.Op went through
// reflection. Off is logWrite with INFO disabled.
func BenchmarkWriteLog(b *testing.B) {
	ev := &contract.Event{Key: "tenant/t/project/p/k", Version: 42, Kind: contract.KindPut, Op: contract.OpPut,
		Semantics: contract.Semantics{Purpose: "config"}}
	r := &decide.KV{Header: decide.Header{RequestID: "req-1", Principal: "bench"}}
	info := slog.New(slog.NewJSONHandler(io.Discard, nil)).With("service", "writer")
	b.Run("typed", func(b *testing.B) {
		w := &Writer{log: info}
		b.ReportAllocs()
		for range b.N {
			w.logWrite(&r.Header, ev)
		}
	})
	b.Run("untyped", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			info.Info("write", "key", ev.Key, "version", ev.Version, "kind", ev.Kind, "op", ev.Op,
				"purpose", ev.Semantics.Purpose, "requestId", r.RequestID, "principal", r.Principal)
		}
	})
	b.Run("off", func(b *testing.B) {
		w := &Writer{log: slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))}
		b.ReportAllocs()
		for range b.N {
			w.logWrite(&r.Header, ev)
		}
	})
}

// BenchmarkWritesAcrossPartitions is 64 clients, each writing its own key,
// the keys spread over 8 projects (figure 18a's shape: 8 partitions of 12
// busy) on one writer with an in-process broker. It reports the Kafka
// transactions per acknowledged write (txns/write) and the CPU of the test
// process per write (cpu-µs/write: the writer and kfake together, not
// Postgres).
func BenchmarkWritesAcrossPartitions(b *testing.B) {
	w := benchWriter(b, 12)
	keys := make([]contract.Key, 64)
	for i := range keys {
		keys[i] = benchKey(b, fmt.Sprintf("tenant/bench/project/p%d/k%d", i%8, i))
	}
	var next atomic.Int64
	txns0, cpu0 := benchTransactions(w), processCPU()
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		k := keys[int(next.Add(1)-1)%len(keys)]
		for pb.Next() {
			if _, err := w.Do(context.Background(), &decide.KV{Header: decide.Header{Key: k, Op: contract.OpPut, Principal: "bench"}, Value: json.RawMessage(`1`)}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric((benchTransactions(w)-txns0)/float64(b.N), "txns/write")
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/write")
}

// benchTransactions is the count of the writer's committed Kafka
// transactions.
func benchTransactions(w *Writer) float64 {
	return testutil.ToFloat64(w.metrics.rounds.Transactions)
}

// processCPU is the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
