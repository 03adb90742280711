package audit

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
)

// BenchmarkDecodeChain is the auditor's CPU per event of figure 18a
// without Kafka and ClickHouse: decode a partition's records (as the
// writer encodes them) and hash and chain them into rows. An op is one
// event; a part holds 256 of them, 64 clients' keys.
func BenchmarkDecodeChain(b *testing.B) {
	const perPart = 256
	recs := make([]*kgo.Record, perPart)
	for i := range recs {
		client, seq := i%64, 100+i/64
		key := fmt.Sprintf("tenant/bench/project/p%d/peers/c%d", client%8, client)
		ts := time.Date(2026, 11, 24, 13, 58, 31, 123456789, time.UTC)
		e := &contract.Event{
			SchemaVersion: 1, Key: key, Scope: fmt.Sprintf("tenant/bench/project/p%d", client%8), Version: int64(seq + 1), PrevVersion: int64(seq),
			Kind: contract.KindPut, Op: contract.OpCAS,
			Before:    []byte(fmt.Sprintf(`{"client":%d,"seq":%d}`, client, seq-1)),
			After:     []byte(fmt.Sprintf(`{"client":%d,"seq":%d}`, client, seq)),
			Semantics: contract.Semantics{Purpose: "checkpoint", Producer: "eskvbench"},
			Principal: "bench", RequestID: fmt.Sprintf("018f2b7c-5e1a-7c3d-9f4e-%012d", client*1000000+seq),
			TS: ts, CreatedAt: ts.Add(-time.Hour), WriterEpoch: 3,
		}
		r, err := changelog.Record(e, "kv.changes", 3, "bench")
		if err != nil {
			b.Fatal(err)
		}
		r.Offset = int64(i)
		recs[i] = r
	}
	a := &Auditor{cfg: Config{HashScheme: CurrentScheme, Topics: changelog.Topics{Changes: "kv.changes", Conflicts: "kv.conflicts"}},
		tips: map[string]tip{}}
	k := testKey()
	b.ReportAllocs()
	for n := 0; n < b.N; n += perPart {
		p := &part{topic: "kv.changes", id: 3, recs: recs[:min(perPart, b.N-n)]}
		a.decode(p, k)
		if p.bad != nil {
			b.Fatal(p.bad)
		}
		a.chain(p, nil, k)
	}
}
