package projection

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/events"
)

// ExplainScan returns the plan, as EXPLAIN ANALYZE shows it, of the
// statement Store.Scan runs for these arguments, under its settings.
func ExplainScan(tb testing.TB, pool *pgxpool.Pool, prefix string, f events.Filter, after string, limit int, now time.Time) string {
	tb.Helper()
	sql, args, err := scanStatement(prefix, f, after, limit, 1<<30, now)
	if err != nil || sql == "" {
		tb.Fatalf("scan statement: %q, %v", sql, err)
	}
	return explain(tb, pool, scanSettings, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+sql, args...)
}

// ExplainRequests returns the plan of the requestId lookup of
// Store.StatesAndRequests for one (key, requestId), with sequential and
// bitmap scans off: on a small table the planner would rather scan, and
// the question is whether the index can answer it.
func ExplainRequests(tb testing.TB, pool *pgxpool.Pool, key, requestID string) string {
	tb.Helper()
	return explain(tb, pool, `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off`,
		"EXPLAIN (COSTS OFF) "+requestsSQL, []string{key}, []string{requestID})
}

// explain runs the EXPLAIN statement sql after settings, in a transaction,
// and returns its lines.
func explain(tb testing.TB, pool *pgxpool.Pool, settings, sql string, args ...any) string {
	tb.Helper()
	var plan strings.Builder
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), settings); err != nil {
			return err
		}
		rows, err := tx.Query(context.Background(), sql, args...)
		if err != nil {
			return err
		}
		var line string
		_, err = pgx.ForEachRow(rows, []any{&line}, func() error {
			plan.WriteString(line + "\n")
			return nil
		})
		return err
	})
	if err != nil {
		tb.Fatalf("explain: %v", err)
	}
	return plan.String()
}
