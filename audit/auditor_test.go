package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/testenv"
)

// history is the events and conflicts a test produced.
type history struct {
	events    []contract.Event
	conflicts []decide.Conflict
}

// synth returns keys×versions events (values {"k":i,"v":v}) and one
// conflict per key, at ts.
func synth(tenant string, keys, versions int, ts time.Time) history {
	var h history
	for i := range keys {
		key := fmt.Sprintf("tenant/%s/project/p%d/k%d", tenant, i%3, i)
		scope := key[:strings.LastIndex(key, "/")]
		prev := "null"
		for v := 1; v <= versions; v++ {
			after := fmt.Sprintf(`{"k":%d,"v":%d}`, i, v)
			h.events = append(h.events, contract.Event{
				SchemaVersion: 1, Key: key, Scope: scope, Version: int64(v), PrevVersion: int64(v - 1),
				Kind: contract.KindPut, Op: contract.OpSet, Before: json.RawMessage(prev), After: json.RawMessage(after),
				Semantics: contract.Semantics{Purpose: "cursor", Producer: "synth"}, Principal: "tester",
				RequestID: fmt.Sprintf("r-%d-%d", i, v), TS: ts, CreatedAt: ts,
			})
			prev = after
		}
		h.conflicts = append(h.conflicts, decide.Conflict{
			SchemaVersion: 1, ID: fmt.Sprintf("c-%d", i), Key: key, Scope: scope, Op: contract.OpCAS,
			ExpectedVersion: 1, CurrentVersion: int64(versions), Attempted: json.RawMessage(`"attempt"`),
			Current: json.RawMessage(prev), Semantics: contract.Semantics{Purpose: "cursor"}, Principal: "tester",
			TS: ts, Reason: "version_mismatch",
		})
	}
	return h
}

// all returns h's events and conflicts, for testenv.Producer.Records.
func (h history) all() []any {
	out := make([]any, 0, len(h.events)+len(h.conflicts))
	for _, e := range h.events {
		out = append(out, e)
	}
	for _, c := range h.conflicts {
		out = append(out, c)
	}
	return out
}

// produce writes h as a writer does: in transactions of at most 500
// records. With abort, one more transaction of junk events is aborted.
func produce(tb testing.TB, b *testenv.Broker, h history, abort bool) {
	tb.Helper()
	p := testenv.MustProducer(tb, b)
	for recs := p.Records(tb, h.all()...); len(recs) > 0; {
		n := min(len(recs), 500)
		p.Txn(tb, true, recs[:n]...)
		recs = recs[n:]
	}
	if abort {
		junk := synth("aborted", 3, 2, time.Now())
		p.Abort(tb, history{events: junk.events}.all()...)
	}
}

// auditor is an auditor running in the background until the test ends.
type auditor struct {
	*audit.Auditor
	*testenv.Running
}

// runAuditor runs an auditor on b and s until the test ends: cfg's
// brokers and topics are b's, its linger is 20ms unless set; log nil
// discards the logs, reg may be nil.
func runAuditor(tb testing.TB, b *testenv.Broker, s *audit.Store, cfg audit.Config, log *slog.Logger, reg prometheus.Registerer) *auditor {
	tb.Helper()
	kr, err := audit.NewKeyring(testKey(tb))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Brokers, cfg.Topics = b.Addrs, b.Topics
	if cfg.Linger == 0 {
		cfg.Linger = 20 * time.Millisecond
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a, err := audit.New(cfg, s, kr, log, reg)
	if err != nil {
		tb.Fatal(err)
	}
	return &auditor{Auditor: a, Running: testenv.RunUntilCleanup(tb, "auditor", a.Run)}
}

// waitCaughtUp waits until a has committed the last stable offset of
// every partition of both topics.
func waitCaughtUp(tb testing.TB, b *testenv.Broker, a *auditor) {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs...))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends := map[string]map[int32]int64{}
	for _, t := range []string{b.Topics.Changes, b.Topics.Conflicts} {
		ends[t] = testenv.EndOffsets(ctx, tb, cl, t)
	}
	testenv.WaitForNil(tb, 60*time.Second, "the auditor to catch up", func() error {
		c := a.Committed()
		for t, ps := range ends {
			for p, end := range ps {
				if end > 0 && c[t][p] < end {
					return fmt.Errorf("committed %v, ends %v", c, ends)
				}
			}
		}
		return nil
	})
}

type dbRow struct {
	key                             string
	version, prevVersion            int64
	before, after, prevChain, chain string
	partition                       int32
	offset                          int64
}

func finalRows(tb testing.TB, ch *testenv.ClickHouse) []dbRow {
	tb.Helper()
	rows, err := ch.Conn.Query(context.Background(), `SELECT key, version, prev_version, before_hash, after_hash, prev_chain_hash, chain_hash, kafka_partition, kafka_offset
FROM audit_events FINAL ORDER BY key, version`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var out []dbRow
	for rows.Next() {
		var r dbRow
		if err := rows.Scan(&r.key, &r.version, &r.prevVersion, &r.before, &r.after, &r.prevChain, &r.chain, &r.partition, &r.offset); err != nil {
			tb.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func count(tb testing.TB, ch *testenv.ClickHouse, q string) uint64 {
	tb.Helper()
	var n uint64
	if err := ch.Conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	return n
}

func TestAuditorIngestsLogOneToOne(t *testing.T) {
	b := testenv.MustBroker(t, 4)
	s, ch := mustStore(t)
	h := synth("acme", 40, 5, time.Now().UTC().Truncate(time.Microsecond))
	produce(t, b, h, true)
	a := runAuditor(t, b, s, audit.Config{Group: "g1"}, nil, prometheus.NewRegistry())
	waitCaughtUp(t, b, a)

	rows := finalRows(t, ch)
	if len(rows) != len(h.events) {
		t.Fatalf("%d rows for %d events", len(rows), len(h.events))
	}
	k := testKey(t)
	byKey := map[string]dbRow{}
	for _, r := range rows {
		if strings.Contains(r.key, "aborted") {
			t.Fatalf("row of an aborted transaction: %+v", r)
		}
		if p, ok := byKey[r.key]; ok {
			if r.version != p.version+1 || r.before != p.after || r.prevChain != p.chain {
				t.Fatalf("%s@%d does not follow @%d: before %s after(prev) %s, prev chain %s chain(prev) %s",
					r.key, r.version, p.version, r.before, p.after, r.prevChain, p.chain)
			}
		} else if r.version != 1 || r.prevChain != "" {
			t.Fatalf("%s starts at version %d with prev chain %q", r.key, r.version, r.prevChain)
		}
		byKey[r.key] = r
	}
	for i := range h.events {
		e := &h.events[i]
		if got := byKey[e.Key]; got.version == e.Version && got.after != audit.ValueHash(k, e.Key, e.After) {
			t.Fatalf("%s@%d after hash %s, want %s", e.Key, e.Version, got.after, audit.ValueHash(k, e.Key, e.After))
		}
	}
	if n := count(t, ch, "SELECT uniqExact(key, conflict_id) FROM audit_conflicts"); n != uint64(len(h.conflicts)) {
		t.Fatalf("%d conflicts, want %d", n, len(h.conflicts))
	}

	t.Run("ReplayByAnotherGroupAddsNoDistinctRow", func(t *testing.T) {
		a2 := runAuditor(t, b, s, audit.Config{Group: "g2"}, nil, nil)
		waitCaughtUp(t, b, a2)
		if raw := count(t, ch, "SELECT count() FROM audit_events"); raw < uint64(2*len(h.events)) {
			t.Fatalf("raw rows %d: the replay inserted nothing?", raw)
		}
		again := finalRows(t, ch)
		if len(again) != len(rows) {
			t.Fatalf("after replay %d distinct rows, before %d", len(again), len(rows))
		}
		if n := count(t, ch, "SELECT uniqExact(key, version, chain_hash) FROM audit_events"); n != uint64(len(h.events)) {
			t.Fatalf("replay computed other chain hashes: %d distinct (key, version, chain_hash) for %d events", n, len(h.events))
		}
	})
}

// TestTTLExpirations: an expire event appears in ttl_expirations with the
// semantic context of the entry, and does not count as an applied write.
func TestTTLExpirations(t *testing.T) {
	b := testenv.MustBroker(t, 2)
	s, ch := mustStore(t)
	ts := time.Now().UTC().Truncate(time.Microsecond)
	exp := ts.Add(30 * time.Second)
	sem := contract.Semantics{Purpose: "lock", Producer: "scheduler", ConsumerHints: []string{"nightly-job"}, TTLSeconds: 30}
	put := contract.Event{SchemaVersion: 1, Key: "tenant/t/project/p/locks/nightly", Scope: "tenant/t/project/p", Version: 1,
		Kind: contract.KindPut, Op: contract.OpCreate, Before: json.RawMessage("null"), After: json.RawMessage(`{"holder":"w1"}`),
		Semantics: sem, SpecRef: "adr-12", Principal: "w1", TS: ts, CreatedAt: ts, ExpiresAt: &exp}
	expire := put
	expire.Version, expire.PrevVersion, expire.Kind, expire.Op = 2, 1, contract.KindExpire, contract.OpExpire
	expire.Before, expire.After, expire.Principal, expire.TS = put.After, json.RawMessage("null"), "sweeper", exp
	produce(t, b, history{events: []contract.Event{put, expire}}, false)
	a := runAuditor(t, b, s, audit.Config{Group: "ttl"}, nil, nil)
	waitCaughtUp(t, b, a)

	var (
		key, purpose, producer, specRef, before string
		hints                                   []string
		version, ttl, expiresAt                 int64
	)
	if err := ch.Conn.QueryRow(context.Background(), `SELECT key, version, purpose, producer, consumer_hints, spec_ref, ttl_seconds, expires_at_us, before_hash
FROM ttl_expirations`).Scan(&key, &version, &purpose, &producer, &hints, &specRef, &ttl, &expiresAt, &before); err != nil {
		t.Fatal(err)
	}
	if key != put.Key || version != 2 || purpose != "lock" || producer != "scheduler" || len(hints) != 1 || specRef != "adr-12" ||
		ttl != 30 || expiresAt != exp.UnixMicro() || before != audit.ValueHash(testKey(t), put.Key, put.After) {
		t.Fatalf("ttl_expirations: %s@%d %s %s %v %s %d %d %s", key, version, purpose, producer, hints, specRef, ttl, expiresAt, before)
	}
	if n := count(t, ch, "SELECT sum(applied) FROM conflict_rate_hour"); n != 1 {
		t.Fatalf("applied writes %d, want 1 (the expiry is not a write)", n)
	}
}
