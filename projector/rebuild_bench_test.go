package projector_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
)

// BenchmarkRebuild folds ESKV_REBUILD_KEYS keys (default 100,000) of
// figure 23's job values (4 scalar fields each) over 7 projects that each
// declare three of them (figure 23's attempt, state and updated_at),
// produced in transactions of 5,000, into a fresh schema per iteration,
// as `projector rebuild -into` does (asynchronous commits), and reports
// keys/s (figure 23f's measure). With -v it logs the rebuild's phases:
//
//	ESKV_REBUILD_KEYS=560000 go test -run '^$' -bench BenchmarkRebuild -benchtime 1x -v ./projector/
func BenchmarkRebuild(b *testing.B) {
	const txn, parts, projects = 5000, 12, 7
	keys := 100_000
	if v := os.Getenv("ESKV_REBUILD_KEYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("ESKV_REBUILD_KEYS=%q: want a positive number", v)
		}
		keys = n
	}
	br, pg, _, prod := mustSetup(b, parts)
	now := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	evs := make([]any, 0, txn)
	for p := range projects {
		evs = append(evs, newEvent(contract.FieldIndexesKey(fmt.Sprintf("tenant/t/project/p%d", p)), 1, contract.KindPut,
			`{"fields":["attempt","state","updated_at"]}`))
	}
	for i := range keys {
		scope := fmt.Sprintf("tenant/t/project/p%d", i%projects)
		e := newEvent(fmt.Sprintf("%s/jobs/%07d", scope, i), 1, contract.KindPut,
			fmt.Sprintf(`{"state":"done","attempt":%d,"owner":"worker-%d","updated_at":%q}`, i%10, i%37, now.Add(-time.Duration(i%240)*time.Second).Format(time.RFC3339)))
		evs = append(evs, e)
		if len(evs) >= txn {
			prod.Commit(b, evs...)
			evs = evs[:0]
		}
	}
	if len(evs) > 0 {
		prod.Commit(b, evs...)
	}
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	b.ResetTimer()
	for i := range b.N {
		schema := fmt.Sprintf("bench_%d", i)
		pg.MustSchema(b, schema).Close()
		cfg, err := pgxpool.ParseConfig(pg.URL)
		if err != nil {
			b.Fatal(err)
		}
		if err := projection.InSchema(cfg, schema); err != nil {
			b.Fatal(err)
		}
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := projection.Migrate(context.Background(), pool); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		st, err := projector.Rebuild(context.Background(), projector.RebuildConfig{Brokers: br.Addrs, Partitions: parts}, projection.New(pool), log)
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		pool.Close()
		b.ReportMetric(float64(st.Events)/took.Seconds(), "keys/s")
	}
}
