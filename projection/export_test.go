package projection

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ExplainScan returns the plan, as EXPLAIN ANALYZE shows it, of the
// statement Store.Scan runs for these arguments, under its settings.
func ExplainScan(tb testing.TB, pool *pgxpool.Pool, prefix string, f Filter, after string, limit int, now time.Time) string {
	tb.Helper()
	sql, args, err := scanStatement(prefix, f, Page{After: after, Limit: limit, MaxBytes: 1 << 30, Now: now})
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

// ExplainApply runs the statements a Store of New (HistoryJSONB) sends
// for batch one by one, each under EXPLAIN (ANALYZE, BUFFERS) of its
// generic plan (the plan the projector's prepared statements settle on),
// in one transaction that is committed, and returns the plans.
func ExplainApply(tb testing.TB, pool *pgxpool.Pool, topic string, batch []Applied) []string {
	tb.Helper()
	b, err := applyBatch(topic, batch, HistoryJSONB)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	var plans []string
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
			return err
		}
		for i, q := range b.QueuedQueries {
			name := fmt.Sprintf("explain_apply_%d", i)
			if _, err := tx.Exec(ctx, "PREPARE "+name+" AS "+q.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("prepare %s: %w", q.SQL, err)
			}
			var types []string
			if err := tx.QueryRow(ctx, `SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = $1`, name).Scan(&types); err != nil {
				return err
			}
			if len(types) != len(q.Arguments) {
				return fmt.Errorf("prepare %s: parameter types %v", q.SQL, types)
			}
			params := make([]string, len(types))
			for j, t := range types {
				params[j] = fmt.Sprintf("$%d::%s", j+1, t)
			}
			rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) EXECUTE "+name+"("+strings.Join(params, ", ")+")",
				append([]any{pgx.QueryExecModeSimpleProtocol}, q.Arguments...)...)
			if err != nil {
				return err
			}
			var plan strings.Builder
			var line string
			if _, err := pgx.ForEachRow(rows, []any{&line}, func() error {
				plan.WriteString(line + "\n")
				return nil
			}); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "DEALLOCATE "+name); err != nil {
				return err
			}
			plans = append(plans, strings.Fields(q.SQL)[0]+" "+strings.Join(strings.Fields(q.SQL)[1:4], " ")+"\n"+plan.String())
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("explain apply: %v", err)
	}
	return plans
}

// ApplyStatements returns the statements Store.Apply sends for batch,
// writing kv_history's rows in format.
func ApplyStatements(topic string, batch []Applied, format HistoryFormat) (*pgx.Batch, error) {
	return applyBatch(topic, batch, format)
}

// WriteFieldsSQL is the kv_fields statement of a batch without fallback
// keys.
const WriteFieldsSQL = writeFields

// FieldCandidate is one indexed-field candidate valueFields finds in a
// value: Num is the number's literal (type n), Str the string otherwise.
type FieldCandidate struct {
	Field, Type string
	Num, Str    *string
}

// ValueFields returns valueFields' candidates of v, and whether it
// decides v (false: Apply asks kv_value_fields).
func ValueFields(v []byte) ([]FieldCandidate, bool) {
	fields, ok := valueFields(string(v), nil)
	var out []FieldCandidate
	for _, f := range fields {
		c := FieldCandidate{Field: f.name, Type: string(rune(f.typ))}
		if f.typ == 'n' {
			c.Num = &f.num
		} else {
			c.Str = &f.str
		}
		out = append(out, c)
	}
	return out, ok
}

// MigrateTo applies the migrations up to the one numbered upTo: a
// projection as an older release left it.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, upTo int64) error {
	return migrate(ctx, pool, upTo)
}

// ExplainKeys returns the plan, as EXPLAIN VERBOSE shows it (with the
// columns each node outputs), of the statement Store.Keys runs.
func ExplainKeys(tb testing.TB, pool *pgxpool.Pool, prefix string, now time.Time) string {
	tb.Helper()
	end, _ := prefixEnd(prefix)
	return explain(tb, pool, "SELECT 1", "EXPLAIN (VERBOSE, COSTS OFF) "+keysSQL, prefix, "", now, end, 11, 1<<20)
}

// ExplainPageAsOf is the plan of PageAsOf's statement for a page of limit
// under prefix at offset (a position: no time).
func ExplainPageAsOf(tb testing.TB, pool *pgxpool.Pool, prefix string, offset int64, limit int) string {
	tb.Helper()
	end, _ := prefixEnd(prefix)
	return explain(tb, pool, `SET LOCAL enable_seqscan = off`, "EXPLAIN (COSTS OFF) "+pageAsOfSQL("true"),
		prefix, "", end, offset, nil, limit+1, 1<<30)
}

// SetStreams sets how many fields one pass of Restore's derivation of
// kv_fields sorts its rows out to.
func (d *DeferredIndexes) SetStreams(n int) { d.streams = n }

// SnapshotsWaiting is how many Snapshots of s wait for a slot.
func SnapshotsWaiting(s *Store) int {
	s.snapshots.mu.Lock()
	defer s.snapshots.mu.Unlock()
	return len(s.snapshots.waiting)
}
