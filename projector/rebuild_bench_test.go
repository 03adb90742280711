package projector_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
)

// BenchmarkRebuild folds 100,000 keys of figure 23's job values (4
// scalar fields each), produced in transactions of 5,000, into a fresh
// schema per iteration, as `projector rebuild -into` does (asynchronous
// commits), and reports keys/s (figure 23f's measure):
//
//	go test -run '^$' -bench BenchmarkRebuild -benchtime 3x ./projector/
func BenchmarkRebuild(b *testing.B) {
	const keys, txn, parts = 100_000, 5000, 12
	br, pg, _, prod := mustSetup(b, parts)
	now := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	evs := make([]any, 0, txn)
	for i := range keys {
		scope := fmt.Sprintf("tenant/t/project/p%d", i%20)
		e := newEvent(fmt.Sprintf("%s/jobs/%07d", scope, i), 1, contract.KindPut,
			fmt.Sprintf(`{"state":"done","attempt":%d,"owner":"worker-%d","updated_at":%q}`, i%10, i%37, now.Format(time.RFC3339)))
		evs = append(evs, e)
		if len(evs) == txn {
			prod.Commit(b, evs...)
			evs = evs[:0]
		}
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
		st, err := rebuild(b, br, projection.New(pool), projector.RebuildConfig{})
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		pool.Close()
		b.ReportMetric(float64(st.Events)/took.Seconds(), "keys/s")
	}
}
