package projector

import (
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/internal/benchdata"
)

// cas18aRecords returns what one poll of the projector holds under figure
// 18a of eskvbench (64 clients compare-and-swapping one key each, values
// {"client":i,"seq":n}) once it paces itself: 64 events of 64 keys over 4
// partitions, each partition two Kafka transactions of 8 events closed
// by their markers (72 records), as the writer encodes them. Each call
// moves every key one version on.
func cas18aRecords(tb testing.TB, round int) []*kgo.Record {
	tb.Helper()
	const keys, parts, perTxn = 64, 4, 8
	ts := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC).Add(time.Duration(round) * time.Second)
	var recs []*kgo.Record
	offset := make([]int64, parts)
	for part := range int32(parts) {
		for txn := range keys / parts / perTxn {
			pid := int64(100 + part)
			for i := range perTxn {
				k := int(part)*keys/parts + txn*perTxn + i
				v := int64(round + 1)
				e := benchdata.CAS18aEvent(k, v+1, ts)
				b, err := codec.MarshalEvent(&e)
				if err != nil {
					tb.Fatal(err)
				}
				recs = append(recs, &kgo.Record{Topic: "kv.changes", Partition: part, Offset: offset[part], ProducerID: pid,
					Attrs: kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true}), Key: []byte(e.Key), Value: b})
				offset[part]++
			}
			recs = append(recs, &kgo.Record{Topic: "kv.changes", Partition: part, Offset: offset[part], ProducerID: pid,
				Attrs: kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})})
			offset[part]++
		}
	}
	return recs
}

// BenchmarkSinkGather is the projector's own work on one poll of figure
// 18a (cas18aRecords) around the Postgres round trip: gather (take, the
// decoding of each record, the transaction checks) and count (the
// metrics, Applied). projection's BenchmarkApplyBatchBuild is the rest:
// building the statements and pgx's encoding of their parameters.
func BenchmarkSinkGather(b *testing.B) {
	p := testProjector()
	p.applied = make(map[int32]int64)
	s := &sink{Projector: p, tail: make(map[int32][]*kgo.Record)}
	recs := cas18aRecords(b, 1)
	b.ReportAllocs()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		start := time.Now()
		batch, err := s.gather(recs)
		if err != nil || len(batch) != len(recs) {
			b.Fatalf("gather: %d of %d records, %v", len(batch), len(recs), err)
		}
		p.count(batch, start)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	n := float64(b.N * 64)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/event")
}
