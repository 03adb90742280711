package kafkaconf_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/kafkaconf"
)

func TestCompression(t *testing.T) {
	for _, name := range kafkaconf.CompressionNames() {
		t.Run(name+" is known", func(t *testing.T) {
			if _, err := kafkaconf.Compression(name); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("unknown is refused", func(t *testing.T) {
		if _, err := kafkaconf.Compression("brotli"); err == nil {
			t.Fatal("brotli accepted")
		}
	})
}

// batch returns the bytes of n change records as the writer makes them
// (key, JSON value, CloudEvents headers), about what a produce batch of
// one partition compresses.
func batch(tb testing.TB, n int) []byte {
	tb.Helper()
	var b bytes.Buffer
	ts := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	for i := range n {
		e := &contract.Event{SchemaVersion: 1, Key: fmt.Sprintf("tenant/acme/project/billing/jobs/job-%d/checkpoint", i),
			Scope: "tenant/acme/project/billing", Version: int64(100 + i), PrevVersion: int64(99 + i), Kind: contract.KindPut, Op: contract.OpSet,
			Before: json.RawMessage(fmt.Sprintf(`{"cursor":%d,"shard":"s-%d"}`, 4100+i, i%8)), After: json.RawMessage(fmt.Sprintf(`{"cursor":%d,"shard":"s-%d"}`, 4200+i, i%8)),
			Semantics: contract.Semantics{Purpose: "checkpoint", Producer: "billing-worker"}, Principal: "svc-billing",
			RequestID: fmt.Sprintf("0193a6c2-8f1e-7c3a-9b1d-%012d", i), TS: ts, CreatedAt: ts}
		r, err := changelog.Record(e, "kv.changes", 0, "eskv-writer")
		if err != nil {
			tb.Fatal(err)
		}
		b.Write(r.Key)
		b.Write(r.Value)
		for _, h := range r.Headers {
			b.WriteString(h.Key)
			b.Write(h.Value)
		}
	}
	return b.Bytes()
}

// BenchmarkCompression: the CPU a codec costs per record of a produce
// batch (compressing it on the writer; decompressing it, which a broker
// does to validate every compressed batch and each consumer does again)
// and the bytes it saves (docs/consumers.md has the figures).
func BenchmarkCompression(b *testing.B) {
	for _, records := range []int{1, 16} {
		src := batch(b, records)
		for _, name := range kafkaconf.CompressionNames() {
			codec, err := kafkaconf.Compression(name)
			if err != nil {
				b.Fatal(err)
			}
			c, err := kgo.DefaultCompressor(codec)
			if err != nil {
				b.Fatal(err)
			}
			d := kgo.DefaultDecompressor()
			b.Run(fmt.Sprintf("%s/%d-records", name, records), func(b *testing.B) {
				var buf bytes.Buffer
				out, typ := src, kgo.CodecNone
				for b.Loop() {
					out, typ = src, kgo.CodecNone
					if c != nil {
						buf.Reset()
						out, typ = c.Compress(&buf, src)
					}
					if _, err := d.Decompress(out, typ); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(records)/1000, "µs/record")
				b.ReportMetric(float64(len(out))/float64(len(src)), "size-ratio")
			})
		}
	}
}
