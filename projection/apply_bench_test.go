package projection_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// BenchmarkApplyCAS applies what the projector sees under figure 18a of
// eskvbench (64 clients compare-and-swapping one key each, 8 projects):
// new versions of {"client":i,"seq":n} values (two numeric fields, one
// of which changes) over 64 keys, each batch one projector transaction
// closed by a transaction marker, as the projector reads them (Raw set).
// Batch12 is 18a's shape on the stack (about 12 events per Apply),
// Batch48 that of a busy projector gathering events while an Apply is in
// flight; Batch24 sits between, so that the three give the fixed cost per
// Apply and the cost per event. Each size runs with kv_history's rows in
// both formats: jsonb (HistoryJSONB, the default) and text (HistoryText).
//
// Besides ns/event (the projector's wall time, Postgres included) it
// reports the CPU the database's Postgres backends spent per event
// (pg-µs/event, from /proc: Postgres on this machine), the figure
// docs/performance.md compares. When the server preloads
// pg_stat_statements it also reports the shared buffers the statements
// touched per event (blks/event: nearly deterministic where CPU is not)
// and logs each statement's calls, mean time and buffers per call
// (pg_stat_statements of the benchmark's database only); without it,
// the CPU figures only.
func BenchmarkApplyCAS(b *testing.B) {
	for _, size := range []int{12, 24, 48} {
		for _, format := range []projection.HistoryFormat{projection.HistoryJSONB, projection.HistoryText} {
			b.Run(fmt.Sprintf("Batch%d/%s", size, format), func(b *testing.B) { benchApplyCAS(b, size, format) })
		}
	}
}

// benchApplyCAS is one run of BenchmarkApplyCAS, with declared the
// fields every project declares (ready from the start).
func benchApplyCAS(b *testing.B, size int, format projection.HistoryFormat, declared ...string) {
	pool := testenv.MustPostgres(b)
	if len(declared) > 0 {
		for p := range 8 {
			declareReady(b, pool, fmt.Sprintf("tenant/bench/project/p%d", p), declared...)
		}
	}
	s := projection.New(pool)
	s.SetHistoryFormat(format)
	ctx := context.Background()
	cas := newCASBatches(b, size)
	for range 4*casKeys/size + 1 { // every key exists, as in the bench's steady state
		mustApply(b, s, "kv.changes", cas.next())
	}
	stmts, _ := pgStatements(b, pool, true)
	before := backendCPU(b, pool)
	b.ResetTimer()
	for b.Loop() {
		if err := s.Apply(ctx, "kv.changes", cas.next()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	events := float64(b.N * size)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
	b.ReportMetric(float64(backendCPU(b, pool)-before)/1e3/events, "pg-µs/event")
	if !stmts {
		return
	}
	var hits float64
	ok, list := pgStatements(b, pool, false)
	for _, st := range list {
		if !strings.Contains(st.query, "unnest") || st.calls < int64(b.N) {
			continue // not one of Apply's
		}
		hits += float64(st.hits)
		b.Logf("%6d calls %7.3f ms/call %7.1f blks/call  %s", st.calls, st.ms/float64(st.calls),
			float64(st.hits)/float64(st.calls), st.label())
	}
	if ok {
		b.ReportMetric(hits/events, "blks/event")
	}
}

// casKeys is the number of keys of figure 18a: one per client.
const casKeys = 64

// casBatches makes the batches of BenchmarkApplyCAS: size new versions of
// {"client":i,"seq":n} over casKeys keys, round robin, then a transaction
// marker, at consecutive offsets of partition 0.
type casBatches struct {
	tb   testing.TB
	size int
	// noRequestID leaves the events' requestId out, as figure 18a's
	// clients send none.
	noRequestID bool
	version     [casKeys]int64
	batch       []projection.Applied
	offset      int64
	key         int
}

func newCASBatches(tb testing.TB, size int) *casBatches {
	return &casBatches{tb: tb, size: size, batch: make([]projection.Applied, size+1)}
}

// next returns the next batch, in the same slice every time.
func (c *casBatches) next() []projection.Applied {
	c.tb.Helper()
	for i := range c.size {
		k := c.key % casKeys
		c.key++
		c.version[k]++
		e := put(c.tb, fmt.Sprintf("tenant/bench/project/p%d/cas18a-k%03d", k%8, k), c.version[k],
			fmt.Sprintf(`{"client":%d,"seq":%d}`, k, c.version[k]))
		if c.noRequestID {
			e.RequestID = ""
		}
		raw, err := codec.MarshalEvent(&e)
		if err != nil {
			c.tb.Fatal(err)
		}
		c.batch[i] = projection.Applied{Partition: 0, Offset: c.offset, Event: e, Raw: raw}
		c.offset++
	}
	c.batch[c.size] = projection.Applied{Partition: 0, Offset: c.offset, Marker: true}
	c.offset++
	return c.batch
}

// pgStatement is one statement's row in pg_stat_statements.
type pgStatement struct {
	query       string
	calls, hits int64
	ms          float64
}

// label is the statement's first words, enough to tell Apply's apart.
func (s pgStatement) label() string {
	f := strings.Fields(s.query)
	return strings.Join(f[:min(len(f), 6)], " ")
}

// pgStatements returns the pg_stat_statements rows of pool's database,
// after resetting them when reset is set; ok is false (and nothing is
// returned) when the extension is not there or the server does not
// preload it (CREATE EXTENSION succeeds then, its functions and view
// fail).
func pgStatements(tb testing.TB, pool *pgxpool.Pool, reset bool) (ok bool, out []pgStatement) {
	tb.Helper()
	ctx := context.Background()
	const db = `(SELECT oid FROM pg_database WHERE datname = current_database())`
	if reset {
		if _, err := pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
			tb.Logf("pg_stat_statements: %v", err)
			return false, nil
		}
		if _, err := pool.Exec(ctx, `SELECT pg_stat_statements_reset(0, `+db+`::oid, 0)`); err != nil {
			tb.Logf("pg_stat_statements: %v", err)
			return false, nil
		}
	}
	rows, err := pool.Query(ctx, `SELECT query, calls, total_exec_time, shared_blks_hit
		FROM pg_stat_statements WHERE dbid = `+db+` ORDER BY total_exec_time DESC`)
	if err != nil {
		tb.Logf("pg_stat_statements: %v", err)
		return false, nil
	}
	defer rows.Close()
	for rows.Next() {
		var s pgStatement
		if err := rows.Scan(&s.query, &s.calls, &s.ms, &s.hits); err != nil {
			tb.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		tb.Logf("pg_stat_statements: %v", err)
		return false, nil
	}
	return true, out
}

// backendCPU returns the CPU time, in nanoseconds, of the Postgres
// backends of pool's database: the first field of /proc/<pid>/schedstat
// (exact), or utime+stime of /proc/<pid>/stat (clock ticks, 1/100 s)
// where schedstat is missing. Backends not on this machine count 0.
func backendCPU(tb testing.TB, pool *pgxpool.Pool) int64 {
	tb.Helper()
	rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		tb.Fatal(err)
	}
	var total int64
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			tb.Fatal(err)
		}
		total += processCPU(pid)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return total
}

// processCPU returns the CPU time of process pid in nanoseconds, 0 when
// /proc does not have it.
func processCPU(pid int) int64 {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid)); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				return ns
			}
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0 // not on this machine, or gone
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return (u + s) * 1e7
}

// TestExplainApply prints the generic plans (EXPLAIN ANALYZE, BUFFERS) of
// the statements of one 18a-shaped batch (5 keys) after a warm-up over a
// projection of ESKV_EXPLAIN_KEYS keys (a diagnostic: skipped unless set).
func TestExplainApply(t *testing.T) {
	t.Parallel()
	n, _ := strconv.Atoi(os.Getenv("ESKV_EXPLAIN_KEYS"))
	if n < 64 {
		t.Skip("ESKV_EXPLAIN_KEYS (at least 64) is not set")
	}
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	var offset int64
	apply := func(keys []int, version int64) []projection.Applied {
		var batch []projection.Applied
		for _, k := range keys {
			e := put(t, fmt.Sprintf("tenant/bench/project/p%d/cas18a-k%06d", k%8, k), version,
				fmt.Sprintf(`{"client":%d,"seq":%d}`, k, version))
			batch = append(batch, projection.Applied{Offset: offset, Event: e})
			offset++
		}
		return batch
	}
	for first := 0; first < n; first += 5000 {
		var keys []int
		for k := first; k < min(n, first+5000); k++ {
			keys = append(keys, k)
		}
		mustApply(t, s, "kv.changes", apply(keys, 1))
	}
	if _, err := pool.Exec(context.Background(), `VACUUM ANALYZE`); err != nil {
		t.Fatal(err)
	}
	for v := int64(2); v < 200; v++ {
		for first := 0; first < 64; first += 8 {
			mustApply(t, s, "kv.changes", apply([]int{first, first + 1, first + 2, first + 3, first + 4}, v))
		}
	}
	for _, plan := range projection.ExplainApply(t, pool, "kv.changes", apply([]int{10, 11, 12, 13, 14}, 200)) {
		t.Log(plan)
	}
}

// BenchmarkApplyCASDeclared is BenchmarkApplyCAS (text history) with
// both fields of the values declared in every project: the cost of
// keeping kv_fields, one of the two changing per write.
func BenchmarkApplyCASDeclared(b *testing.B) {
	for _, size := range []int{12, 48} {
		b.Run(fmt.Sprintf("Batch%d", size), func(b *testing.B) { benchApplyCAS(b, size, projection.HistoryText, "client", "seq") })
	}
}
