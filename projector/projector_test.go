package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
)

const partitions = 4

// fold generates valid event streams (contiguous versions per key, puts,
// deletes and expires, re-creates) and remembers each key's last event:
// the projection must equal it.
type fold struct {
	rng  *rand.Rand
	keys []string
	last map[string]contract.Event
}

func newFold(seed uint64, scopes, keysPerScope int) *fold {
	f := &fold{rng: rand.New(rand.NewPCG(seed, 1)), last: make(map[string]contract.Event)}
	for s := range scopes {
		for k := range keysPerScope {
			f.keys = append(f.keys, fmt.Sprintf("tenant/t%d/project/p/k%d", s, k))
		}
	}
	return f
}

func (f *fold) next() contract.Event {
	key := f.keys[f.rng.IntN(len(f.keys))]
	prev, seen := f.last[key]
	e := newEvent(key, prev.Version+1, contract.KindPut, fmt.Sprintf(`{"n":%d,"r":%d}`, prev.Version+1, f.rng.IntN(1000)))
	if seen && prev.Live() {
		e.Op = contract.OpCAS
		e.Before = prev.After
		e.CreatedAt = prev.CreatedAt
		switch f.rng.IntN(8) {
		case 0:
			e.Kind, e.Op, e.After = contract.KindDelete, contract.OpDelete, nil
		case 1:
			e.Kind, e.Op, e.After = contract.KindExpire, contract.OpExpire, nil
		}
	}
	f.last[key] = e
	return e
}

func newEvent(key string, version int64, kind contract.Kind, after string) contract.Event {
	k, err := contract.ParseKey(key)
	if err != nil {
		panic(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond) // Postgres keeps microseconds
	e := contract.Event{
		SchemaVersion: contract.SchemaVersion,
		Key:           key,
		Scope:         k.Scope(),
		Version:       version,
		PrevVersion:   version - 1,
		Kind:          kind,
		Op:            contract.OpSet,
		CreatedAt:     now,
		Semantics:     contract.Semantics{Purpose: "cursor", Producer: "test"},
		RequestID:     fmt.Sprintf("req-%s-%d", key, version),
		Principal:     "tester",
		TS:            now,
		WriterEpoch:   1,
	}
	if kind == contract.KindPut {
		e.After = json.RawMessage(after)
	}
	return e
}

// mustSetup returns what most tests run on: a broker with n partitions,
// a fresh Postgres with a projection store on it, and a producer.
func mustSetup(tb testing.TB, n int32) (*testenv.Broker, *testenv.Postgres, *projection.Store, *testenv.Producer) {
	tb.Helper()
	b := testenv.MustBroker(tb, n)
	pg := testenv.MustPostgresDB(tb)
	return b, pg, projection.New(pg.Pool), testenv.MustProducer(tb, b)
}

// runTimeout bounds how long a test waits for a projector to stop and
// for the projection to catch up.
const runTimeout = 30 * time.Second

// running is a projector running in the background until the test ends.
type running struct {
	*testenv.Running
	p   *projector.Projector
	reg *prometheus.Registry
}

// start runs a projector on b and s until the test ends; cfg's brokers
// and partition count default to b's.
func start(tb testing.TB, b *testenv.Broker, s *projection.Store, cfg projector.Config) *running {
	tb.Helper()
	if cfg.Brokers == nil {
		cfg.Brokers = b.Addrs
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = b.Topics.Partitions
	}
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: testLogLevel}))
	p, err := projector.New(cfg, s, log, reg)
	if err != nil {
		tb.Fatalf("projector.New: %v", err)
	}
	return &running{Running: testenv.RunUntilCleanup(tb, "projector", p.Run), p: p, reg: reg}
}

// testWriter sends logs to the test's log.
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.tb.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// assertFold checks that the projection of every key equals the state
// after its last event, and that kv_history holds each version 1..last
// exactly once.
func assertFold(tb testing.TB, pool *pgxpool.Pool, s *projection.Store, f *fold) {
	tb.Helper()
	ctx := context.Background()
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range f.last {
			if !yield(k) {
				return
			}
		}
	})
	got, err := s.States(ctx, keys)
	if err != nil {
		tb.Fatalf("states: %v", err)
	}
	for _, k := range keys {
		e := f.last[k]
		if want := keystate.FromEvent(&e); !reflect.DeepEqual(got[k], want) {
			tb.Errorf("%s:\n got %+v\nwant %+v", k, got[k], want)
		}
	}
	rows, err := pool.Query(ctx, `SELECT key, count(*), min(version), max(version) FROM kv_history GROUP BY key`)
	if err != nil {
		tb.Fatalf("history: %v", err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var key string
		var n, lo, hi int64
		if err := rows.Scan(&key, &n, &lo, &hi); err != nil {
			tb.Fatalf("history: %v", err)
		}
		seen++
		if want := f.last[key].Version; lo != 1 || hi != want || n != want {
			tb.Errorf("history of %s: %d rows, versions %d..%d; want versions 1..%d once each", key, n, lo, hi, want)
		}
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("history: %v", err)
	}
	if seen != len(keys) {
		tb.Errorf("history has %d keys, want %d", seen, len(keys))
	}
}

// produce writes n generated events in committed transactions of size.
func produce(tb testing.TB, p *testenv.Producer, f *fold, n, size int) {
	tb.Helper()
	for n > 0 {
		k := min(size, n)
		evs := make([]any, k)
		for i := range evs {
			evs[i] = f.next()
		}
		p.Commit(tb, evs...)
		n -= k
	}
}

func counter(tb testing.TB, reg *prometheus.Registry, name string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	tb.Fatalf("metric %s not found", name)
	return 0
}

func TestProjectionEqualsFold(t *testing.T) {
	t.Parallel()
	b, pg, s, prod := mustSetup(t, partitions)
	f := newFold(1, 8, 10)

	produce(t, prod, f, 400, 25) // before the projector starts: catch-up
	r := start(t, b, s, projector.Config{})
	produce(t, prod, f, 400, 25) // while it runs: tailing
	testenv.WaitProjected(t, runTimeout, s, b.Topics.Changes, prod.Committed(t))

	assertFold(t, pg.Pool, s, f)
	if got := counter(t, r.reg, "eskv_projector_events_applied_total"); got != 800 {
		t.Errorf("events applied counter = %v, want 800", got)
	}
	if got, want := r.p.Applied(), prod.Committed(t); !reflect.DeepEqual(got, want) {
		t.Errorf("Applied() = %v, want %v", got, want)
	}
	if err := r.Stop(t); err != nil {
		t.Errorf("Run after cancel: %v, want nil", err)
	}
}

func TestRestartResumesExactlyOnce(t *testing.T) {
	t.Parallel()
	b, pg, s, prod := mustSetup(t, partitions)
	f := newFold(2, 8, 10)

	// The first projector is stopped while events keep coming.
	first := start(t, b, s, projector.Config{MaxBatch: 50})
	produce(t, prod, f, 300, 20)
	testenv.WaitFor(t, runTimeout, "the first projector to apply 100 events", func() bool {
		var applied int64
		for _, o := range first.p.Applied() {
			applied += o
		}
		return applied >= 100
	})
	if err := first.Stop(t); err != nil {
		t.Fatalf("first projector: %v", err)
	}
	produce(t, prod, f, 300, 20)
	stopped, err := s.Offsets(context.Background(), b.Topics.Changes)
	if err != nil {
		t.Fatal(err)
	}
	caughtUp := true
	for p, o := range prod.Committed(t) {
		caughtUp = caughtUp && stopped[p] >= o
	}
	if caughtUp {
		t.Fatalf("the first projector applied everything (%v) before it stopped; the test proves nothing", stopped)
	}

	start(t, b, s, projector.Config{MaxBatch: 50})
	testenv.WaitProjected(t, runTimeout, s, b.Topics.Changes, prod.Committed(t))
	assertFold(t, pg.Pool, s, f)
}

func TestAbortedTransactionNeverProjected(t *testing.T) {
	t.Parallel()
	b, pg, s, prod := mustSetup(t, partitions)
	const a, c = "tenant/t/project/p/a", "tenant/t/project/p/c"
	const aborted = "tenant/t/project/p/aborted"

	a1 := newEvent(a, 1, contract.KindPut, `"committed"`)
	prod.Commit(t, a1)
	prod.Abort(t, newEvent(aborted, 1, contract.KindPut, `1`), newEvent(a, 2, contract.KindPut, `"aborted"`))
	c1 := newEvent(c, 1, contract.KindPut, `"after"`)
	prod.Commit(t, c1)

	start(t, b, s, projector.Config{})
	testenv.WaitProjected(t, runTimeout, s, b.Topics.Changes, prod.Committed(t))

	got, err := s.States(context.Background(), []string{a, c, aborted})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]keystate.State{a: keystate.FromEvent(&a1), c: keystate.FromEvent(&c1), aborted: {}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("states:\n got %+v\nwant %+v", got, want)
	}
	var n int
	if err := pg.Pool.QueryRow(context.Background(), `SELECT count(*) FROM kv_history`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("kv_history has %d rows, want 2 (the committed events only)", n)
	}
}

func TestPoisonPillStops(t *testing.T) {
	t.Parallel()
	b, _, s, prod := mustSetup(t, 1)
	const k = "tenant/t/project/p/k"

	good := newEvent(k, 1, contract.KindPut, `1`)
	prod.Commit(t, good)
	prod.Txn(t, true, &kgo.Record{Topic: b.Topics.Changes, Partition: 0, Key: []byte(k), Value: []byte(`{not json`)})
	prod.Commit(t, newEvent(k, 2, contract.KindPut, `2`))

	err := start(t, b, s, projector.Config{}).Wait(t, runTimeout)
	if err == nil || !strings.Contains(err.Error(), "poison pill at kv.changes/0@") {
		t.Fatalf("Run returned %v, want a poison pill error naming topic/partition@offset", err)
	}
	if st, err := s.State(context.Background(), k); err != nil || st.Version != 1 {
		t.Errorf("state %+v, %v; want version 1 (applied up to the poison pill, not past it)", st, err)
	}
	offs, err := s.Offsets(context.Background(), b.Topics.Changes)
	if err != nil {
		t.Fatal(err)
	}
	// Offsets: 0 the event, 1 its commit marker, 2 the poison pill. The
	// stored offset moves past the marker and stops at the pill.
	if offs[0] != 2 {
		t.Errorf("stored offset %d, want 2 (the poison pill is not skipped)", offs[0])
	}
}

func TestPartitionCountMismatchFailsAtStart(t *testing.T) {
	t.Parallel()
	b := testenv.MustBroker(t, partitions)
	s := projection.New(testenv.MustPostgres(t))
	err := start(t, b, s, projector.Config{Partitions: partitions + 1}).Wait(t, runTimeout)
	if !errors.Is(err, changelog.ErrPartitionCount) {
		t.Fatalf("Run returned %v, want %v", err, changelog.ErrPartitionCount)
	}
}

func TestResumesAtPostgresOffsets(t *testing.T) {
	t.Parallel()
	b, pg, s, prod := mustSetup(t, 1)
	const k = "tenant/t/project/p/k"

	var evs []contract.Event
	for v := int64(1); v <= 5; v++ {
		evs = append(evs, newEvent(k, v, contract.KindPut, fmt.Sprint(v)))
		prod.Commit(t, evs[len(evs)-1]) // offsets 0, 2, 4, 6, 8 (commit markers between)
	}
	// Postgres says offsets up to 4 are applied (version 3). The projector
	// must start at 5, so versions 1 and 2 never reach kv_history.
	if err := s.Apply(context.Background(), b.Topics.Changes, []projection.Applied{{Partition: 0, Offset: 4, Event: evs[2]}}); err != nil {
		t.Fatal(err)
	}
	start(t, b, s, projector.Config{})
	testenv.WaitProjected(t, runTimeout, s, b.Topics.Changes, prod.Committed(t))

	rows, err := pg.Pool.Query(context.Background(), `SELECT version FROM kv_history ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []int64{3, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("history versions %v, want %v", got, want)
	}
}

var testLogLevel = slog.LevelWarn

// BenchmarkProjectorLag produces 5,000 events/s (transactions of 50 every
// 10 ms, as a writer's group commit would) for three seconds per
// iteration and reports the projector's lag (event ts to Postgres commit)
// from its histogram. Run with -benchtime=1x.
func BenchmarkProjectorLag(b *testing.B) {
	const (
		rate     = 5000
		txnSize  = 50
		duration = 3 * time.Second
	)
	br := testenv.MustBroker(b, 12)
	s := projection.New(testenv.MustPostgres(b))
	prod := testenv.MustProducer(b, br)
	f := newFold(3, 200, 20)
	r := start(b, br, s, projector.Config{})
	produce(b, prod, f, txnSize, txnSize) // the group is joined once this is applied
	testenv.WaitProjected(b, runTimeout, s, br.Topics.Changes, prod.Committed(b))

	b.ResetTimer()
	var produced int
	began := time.Now()
	for b.Loop() {
		tick := time.NewTicker(time.Second * txnSize / rate)
		for end := time.Now().Add(duration); time.Now().Before(end); <-tick.C {
			produce(b, prod, f, txnSize, txnSize)
			produced += txnSize
		}
		tick.Stop()
		testenv.WaitProjected(b, runTimeout, s, br.Topics.Changes, prod.Committed(b))
	}
	b.StopTimer()
	b.ReportMetric(float64(produced)/time.Since(began).Seconds(), "events/s")
	b.ReportMetric(quantile(b, r.reg, "eskv_projector_lag_seconds", 0.50)*1000, "p50-lag-ms")
	b.ReportMetric(quantile(b, r.reg, "eskv_projector_lag_seconds", 0.99)*1000, "p99-lag-ms")
	b.ReportMetric(quantile(b, r.reg, "eskv_projector_apply_duration_seconds", 0.99)*1000, "p99-apply-ms")
	b.ReportMetric(quantile(b, r.reg, "eskv_projector_batch_size", 0.50), "p50-batch")
}

// quantile estimates a quantile of a histogram, interpolating linearly
// inside a bucket as Prometheus' histogram_quantile does.
func quantile(tb testing.TB, reg *prometheus.Registry, name string, q float64) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		rank := q * float64(h.GetSampleCount())
		lower, below := 0.0, 0.0
		for _, bk := range h.GetBucket() {
			if c := float64(bk.GetCumulativeCount()); c >= rank {
				return lower + (bk.GetUpperBound()-lower)*(rank-below)/(c-below)
			}
			lower, below = bk.GetUpperBound(), float64(bk.GetCumulativeCount())
		}
		return lower
	}
	tb.Fatalf("histogram %s not found", name)
	return 0
}

func TestWaitsForTheTopic(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b := &testenv.Broker{Cluster: c, Addrs: c.ListenAddrs(), Topics: changelog.Topics{
		Changes: changelog.DefaultChangesTopic, Conflicts: changelog.DefaultConflictsTopic, Partitions: 2,
	}}
	s := projection.New(testenv.MustPostgres(t))
	r := start(t, b, s, projector.Config{})

	// The projector starts before the writer has created the topics.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := changelog.Ensure(ctx, mustAdmin(t, b), b.Topics); err != nil {
		t.Fatal(err)
	}
	prod := testenv.MustProducer(t, b)
	e := newEvent("tenant/t/project/p/k", 1, contract.KindPut, `1`)
	prod.Commit(t, e)
	testenv.WaitProjected(t, runTimeout, s, b.Topics.Changes, prod.Committed(t))
	if err := r.Stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
}

func rebuild(tb testing.TB, b *testenv.Broker, s *projection.Store, cfg projector.RebuildConfig) (projector.RebuildStats, error) {
	tb.Helper()
	cfg.Brokers = b.Addrs
	if cfg.Partitions == 0 {
		cfg.Partitions = b.Topics.Partitions
	}
	return projector.Rebuild(context.Background(), cfg, s, nil)
}

func mustCompare(tb testing.TB, pg *testenv.Postgres, schema string) *projection.Diff {
	tb.Helper()
	d, err := projection.Compare(context.Background(), pg.Pool, projection.DiffSpec{Schema: schema, Against: "public", Topic: "kv.changes", Limit: 10})
	if err != nil {
		tb.Fatalf("compare: %v", err)
	}
	return d
}

func TestRebuildEqualsLive(t *testing.T) {
	t.Parallel()
	b, pg, live, prod := mustSetup(t, partitions)
	f := newFold(11, 8, 10) // puts, CAS, deletes, expires and re-creates

	produce(t, prod, f, 300, 20)
	prod.Abort(t, newEvent("tenant/t0/project/p/aborted", 1, contract.KindPut, `1`))
	// A field declared over existing keys: the projector builds it.
	decl := newEvent(contract.FieldIndexesKey("tenant/t0/project/p"), 1, contract.KindPut, `{"fields":["n"]}`)
	prod.Commit(t, decl)
	f.last[decl.Key] = decl
	produce(t, prod, f, 300, 20)
	r := start(t, b, live, projector.Config{})
	testenv.WaitProjected(t, runTimeout, live, b.Topics.Changes, prod.Committed(t))
	waitReady(t, live, "tenant/t0/project/p")
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	// The compacted topic keeps each key's latest event (no transaction
	// is open: see README, "Where kfake differs from Apache Kafka").
	b.Cluster.Compact()

	st, err := rebuild(t, b, projection.New(pg.MustSchema(t, "rebuilt")), projector.RebuildConfig{MaxBatch: 7})
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if want := prod.Committed(t); !maps.Equal(st.Ends, want) {
		t.Errorf("rebuild read up to %v, want the last stable offsets %v", st.Ends, want)
	}
	if st.Events < int64(len(f.last)) || st.Events >= 600 {
		t.Errorf("rebuild read %d events; want at least one per key (%d) and fewer than produced (600): compaction", st.Events, len(f.last))
	}

	d := mustCompare(t, pg, "rebuilt")
	if !d.Equal() || d.NotCompared != 0 || d.Entries != int64(len(f.last)) || d.AgainstEntries != int64(len(f.last)) {
		t.Errorf("diff %+v; want equal, %d keys on both sides, all compared", d, len(f.last))
	}
	if !maps.Equal(d.Offsets, d.AgainstOffsets) {
		t.Errorf("rebuilt offsets %v, live %v", d.Offsets, d.AgainstOffsets)
	}
	if d.History >= d.AgainstHistory || d.HistoryMismatch != 0 {
		t.Errorf("history: rebuilt %d rows, live %d, mismatched %d; want fewer rebuilt rows, none mismatched",
			d.History, d.AgainstHistory, d.HistoryMismatch)
	}

	t.Run("FieldsEqual", func(t *testing.T) {
		// kv_fields (filtered scans) is not part of the diff: each schema
		// derives it from its own entries, so a rebuild has the same rows.
		const cols = `key, field, type, num, str, expires_at`
		var fields, differing int64
		if err := pg.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM public.kv_fields), (SELECT count(*) FROM (
			(SELECT `+cols+` FROM rebuilt.kv_fields EXCEPT SELECT `+cols+` FROM public.kv_fields) UNION ALL
			(SELECT `+cols+` FROM public.kv_fields EXCEPT SELECT `+cols+` FROM rebuilt.kv_fields)) d)`).Scan(&fields, &differing); err != nil {
			t.Fatal(err)
		}
		if fields == 0 || differing != 0 {
			t.Errorf("kv_fields: %d rows live, %d rows on one side only; want some, and none", fields, differing)
		}
		// Those of the declared field of the declaring scope only, and
		// all of them: the live projector built them over the keys
		// written before the declaration.
		var derived, other int64
		if err := pg.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM (
			SELECT e.key, f.field FROM kv_entries e CROSS JOIN LATERAL kv_value_fields(e.value::jsonb) f
			WHERE e.live AND e.scope = 'tenant/t0/project/p' AND f.field = 'n'
			EXCEPT SELECT key, field FROM kv_fields) d),
			(SELECT count(*) FROM kv_fields WHERE field <> 'n' OR key NOT LIKE 'tenant/t0/project/p/%')`).Scan(&derived, &other); err != nil {
			t.Fatal(err)
		}
		if derived != 0 || other != 0 {
			t.Errorf("kv_fields misses %d rows of the declared field, holds %d of others", derived, other)
		}
	})
	t.Run("SameIndexes", func(t *testing.T) {
		// The rebuild built its secondary indexes at the end
		// (projection.DeferIndexes): the same ones as a migrated schema.
		idx := func(schema string) []string {
			rows, err := pg.Pool.Query(context.Background(), `SELECT indexname || ': ' || replace(indexdef, $1 || '.', '')
				FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname`, schema)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if rebuilt, live := idx("rebuilt"), idx("public"); !slices.Equal(rebuilt, live) || len(live) < 10 {
			t.Errorf("indexes of the rebuilt schema:\n%s\nof the live one:\n%s", strings.Join(rebuilt, "\n"), strings.Join(live, "\n"))
		}
	})
	t.Run("ThenTampered", func(t *testing.T) {
		var key string
		if err := pg.Pool.QueryRow(context.Background(), `UPDATE kv_entries SET value = '{"tampered":true}'
			WHERE key = (SELECT min(key) FROM kv_entries WHERE live) RETURNING key`).Scan(&key); err != nil {
			t.Fatal(err)
		}
		d := mustCompare(t, pg, "rebuilt")
		if d.Differing != 1 || len(d.Keys) != 1 || d.Keys[0].Key != key || !slices.Equal(d.Keys[0].Columns, []string{"value"}) {
			t.Errorf("diff after tampering %s: %+v", key, d)
		}
	})
}

// waitReady waits until every field scope declares is ready.
func waitReady(tb testing.TB, s *projection.Store, scope string) {
	tb.Helper()
	deadline := time.Now().Add(runTimeout)
	for {
		fi, err := s.FieldIndexes(context.Background(), scope)
		if err != nil {
			tb.Fatal(err)
		}
		ready := len(fi) > 0
		for _, f := range fi {
			ready = ready && f.Ready
		}
		if ready {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("field indexes of %s not ready after %v: %+v", scope, runTimeout, fi)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRebuildUpToEnds(t *testing.T) {
	t.Parallel()
	b, pg, live, prod := mustSetup(t, partitions)
	f := newFold(12, 4, 5)
	stored := projectAndStop(t, b, live, prod, f, 100)
	produce(t, prod, f, 100, 10) // the live projection trails these

	st, err := rebuild(t, b, projection.New(pg.MustSchema(t, "rebuilt")), projector.RebuildConfig{Ends: stored})
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if !maps.Equal(st.Ends, stored) || st.Events != 100 {
		t.Errorf("rebuild read %d events up to %v, want 100 up to %v", st.Events, st.Ends, stored)
	}
	if d := mustCompare(t, pg, "rebuilt"); !d.Equal() || d.NotCompared != 0 {
		t.Errorf("diff %+v; want equal", d)
	}
}

func TestRebuildErrors(t *testing.T) {
	t.Parallel()
	b, pg, _, prod := mustSetup(t, 1)
	const k = "tenant/t/project/p/k"
	prod.Commit(t, newEvent(k, 1, contract.KindPut, `1`))

	t.Run("ErrEndPastTheLog", func(t *testing.T) {
		_, err := rebuild(t, b, projection.New(pg.MustSchema(t, "past")), projector.RebuildConfig{Ends: map[int32]int64{0: 1000}})
		if !errors.Is(err, changelog.ErrTopicReset) || !strings.Contains(err.Error(), "end 1000 is past the last stable offset 2") {
			t.Errorf("rebuild: %v, want ErrTopicReset naming the offsets", err)
		}
	})
	t.Run("ErrPoisonPill", func(t *testing.T) {
		prod.Txn(t, true, &kgo.Record{Topic: b.Topics.Changes, Partition: 0, Key: []byte(k), Value: []byte(`{not json`)})
		_, err := rebuild(t, b, projection.New(pg.MustSchema(t, "poison")), projector.RebuildConfig{})
		if err == nil || !strings.Contains(err.Error(), "poison pill") || !strings.Contains(err.Error(), "kv.changes/0@2") {
			t.Errorf("rebuild: %v, want a poison pill error naming kv.changes/0@2", err)
		}
	})
}
