package projection_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// BenchmarkApplyCAS applies what the projector sees under figure 18a of
// eskvbench (64 clients compare-and-swapping one key each, 8 projects):
// batches of 32 new versions of {"client":i,"seq":n} values over 64 keys,
// one projector transaction each. Besides ns/event (the projector's wall
// time, Postgres included) it reports the CPU the database's Postgres
// backends spent per event (pg-µs/event, from /proc: Postgres on this
// machine), the figure docs/performance.md compares.
func BenchmarkApplyCAS(b *testing.B) {
	pool := testenv.MustPostgres(b)
	s := projection.New(pool)
	ctx := context.Background()
	const keys, size = 64, 32
	version := make([]int64, keys)
	batch := make([]projection.Applied, size)
	var offset int64
	next := 0
	fill := func() {
		for i := range batch {
			k := next % keys
			next++
			version[k]++
			batch[i] = projection.Applied{Partition: int32(k % 8), Offset: offset,
				Event: put(b, fmt.Sprintf("tenant/bench/project/p%d/cas18a-k%03d", k%8, k), version[k],
					fmt.Sprintf(`{"client":%d,"seq":%d}`, k, version[k]))}
			offset++
		}
	}
	for range 4 { // every key exists, as in the bench's steady state
		fill()
		mustApply(b, s, "kv.changes", batch)
	}
	before := backendCPU(b, pool)
	b.ResetTimer()
	for b.Loop() {
		fill()
		if err := s.Apply(ctx, "kv.changes", batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	events := float64(b.N * size)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
	b.ReportMetric(float64(backendCPU(b, pool)-before)*1e6/100/events, "pg-µs/event")
}

// backendCPU returns the utime+stime, in clock ticks (1/100 s), of the
// Postgres backends of pool's database.
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
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // not on this machine, or gone
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		total += u + s
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return total
}
