package audit_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
)

// BenchmarkIngest measures the auditor catching up on a backlog of b.N
// events (200 keys, one conflict per key) in an in-process broker:
// decode, hash, chain, insert into ClickHouse, commit.
func BenchmarkIngest(b *testing.B) {
	br := testenv.MustBroker(b, 12)
	s, _ := mustStore(b)
	keys := 200
	versions := max(b.N/keys, 1)
	h := synth("bench", keys, versions, time.Now().UTC())
	produce(b, br, h, false)
	b.ResetTimer()
	start := time.Now()
	a := runAuditor(b, br, s, audit.Config{Group: "bench"}, nil, nil)
	waitCaughtUp(b, br, a)
	b.StopTimer()
	rows := len(h.events) + len(h.conflicts)
	b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "rows/s")
}

// benchEvent is an event of figure 18a (tools/eskvbench): client i's
// compare-and-swap of its own key in one of 8 projects, with values like
// {"client":7,"seq":123}.
func benchEvent(client, seq int) *contract.Event {
	key := fmt.Sprintf("tenant/bench/project/p%d/peers/c%d", client%8, client)
	ts := time.Date(2026, 11, 24, 13, 58, 31, 123456789, time.UTC)
	return &contract.Event{
		SchemaVersion: 1, Key: key, Scope: key[:strings.LastIndex(key, "/peers")], Version: int64(seq + 1), PrevVersion: int64(seq),
		Kind: contract.KindPut, Op: contract.OpCAS,
		Before:    json.RawMessage(fmt.Sprintf(`{"client":%d,"seq":%d}`, client, seq-1)),
		After:     json.RawMessage(fmt.Sprintf(`{"client":%d,"seq":%d}`, client, seq)),
		Semantics: contract.Semantics{Purpose: "checkpoint", Producer: "eskvbench"},
		Principal: "bench", RequestID: fmt.Sprintf("018f2b7c-5e1a-7c3d-9f4e-%012d", client*1000000+seq),
		TS: ts, CreatedAt: ts.Add(-time.Hour), WriterEpoch: 3,
	}
}

// BenchmarkEventRow hashes and chains one 18a event per op: two value
// hashes and a chain hash, as the auditor does for every event.
func BenchmarkEventRow(b *testing.B) {
	k, err := audit.ParseKey("bench:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	if err != nil {
		b.Fatal(err)
	}
	es := make([]*contract.Event, 64)
	for i := range es {
		es[i] = benchEvent(i, 123)
	}
	prev := ""
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := audit.EventRow(es[i%len(es)], audit.At{Partition: 3, Offset: int64(i)}, k, audit.CurrentScheme, prev)
		prev = r.ChainHash
	}
}
