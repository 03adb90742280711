package projection_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// BenchmarkApplyCostParts splits the Postgres CPU of an Apply of figure
// 18a's batches (BenchmarkApplyCAS) into parts: a diagnostic, run once
// per batch size whatever b.N (-benchtime 1x), for the sizes
// ESKV_APPLY_PARTS lists (default "12,48"). On one connection it
// sends, one batch each in turn, the statements Apply sends with
// HistoryText ("Apply"); the same with HistoryJSONB, the default (the
// event parsed into jsonb, into the same migrated table); the first with
// the former writeFields (formerWriteFields); writeEntries alone; the
// two statements over empty arrays (their fixed cost: executor start and
// end, the commit); and SELECT 1 (a round trip and an empty
// transaction). Taking turns batch by batch, every part sees the same
// tables (and their dead rows) and the same load from the rest of the
// machine, which separate benchmark runs do not. It logs the CPU of the
// connection's backend (/proc/<pid>/schedstat) per Apply and per event,
// and the tables' HOT updates (-v). PGOPTIONS="-c synchronous_commit=off"
// leaves the commit's WAL flush out. ESKV_APPLY_NO_REQUEST_ID=1 sends
// events without a requestId, as figure 18a's clients write (the
// benchmark's events carry one by default).
func BenchmarkApplyCostParts(b *testing.B) {
	spec := cmp.Or(os.Getenv("ESKV_APPLY_PARTS"), "12,48")
	for _, f := range strings.Split(spec, ",") {
		size, err := strconv.Atoi(f)
		if err != nil || size < 1 {
			b.Fatalf("ESKV_APPLY_PARTS: bad batch size %q", f)
		}
		b.Run(fmt.Sprintf("Batch%d", size), func(b *testing.B) { applyCostParts(b, size) })
	}
}

// applyPart is one way of sending a batch's statements: Apply's, with
// kv_history's rows in format, edited.
type applyPart struct {
	name   string
	format projection.HistoryFormat
	edit   func(b *pgx.Batch) *pgx.Batch
}

func applyCostParts(t testing.TB, size int) {
	db := testenv.MustPostgresDB(t)
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var offset int64 // of the empty part's markers, on partition 1: the stream is on 0
	parts := []applyPart{
		{"Apply", projection.HistoryText, func(b *pgx.Batch) *pgx.Batch { return b }},
		{"Apply, jsonb kv_history", projection.HistoryJSONB, func(b *pgx.Batch) *pgx.Batch { return b }},
		{"Apply, former writeFields", projection.HistoryText, func(b *pgx.Batch) *pgx.Batch {
			q := b.QueuedQueries[1]
			q.SQL = formerWriteFields
			if len(q.Arguments) == 7 { // no fallback keys
				q.Arguments = append(q.Arguments, []string{})
			}
			return b
		}},
		{"writeEntries alone", projection.HistoryText, func(b *pgx.Batch) *pgx.Batch {
			b.QueuedQueries = b.QueuedQueries[:1]
			return b
		}},
		{"both, empty arrays", projection.HistoryText, func(*pgx.Batch) *pgx.Batch {
			offset++
			b, err := projection.ApplyStatements("kv.changes", []projection.Applied{{Partition: 1, Offset: offset, Marker: true}}, projection.HistoryText)
			if err != nil {
				t.Fatal(err)
			}
			b.Queue(projection.WriteFieldsSQL, []string{}, []int64{}, []string{}, []string{}, []string{}, []*string{}, []*string{})
			return b
		}},
		{"SELECT 1", projection.HistoryText, func(*pgx.Batch) *pgx.Batch {
			b := &pgx.Batch{}
			b.Queue(`SELECT 1`)
			return b
		}},
	}
	cas := newCASBatches(t, size)
	cas.noRequestID = os.Getenv("ESKV_APPLY_NO_REQUEST_ID") == "1"
	apply := func(p applyPart) int64 {
		b, err := projection.ApplyStatements("kv.changes", cas.next(), p.format)
		if err != nil {
			t.Fatal(err)
		}
		b = p.edit(b)
		before := processCPU(pid)
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		return processCPU(pid) - before
	}
	for range 4*casKeys/size + 10 { // every key exists, the plans are generic
		apply(parts[0])
	}
	const rounds = 400
	cpu := make([]int64, len(parts))
	for range rounds {
		for i, p := range parts {
			cpu[i] += apply(p)
		}
	}
	for i, p := range parts {
		us := float64(cpu[i]) / rounds / 1e3
		t.Logf("%-26s %7.1f µs/Apply %6.1f µs/event", p.name, us, us/float64(size))
	}
	rows, err := conn.Query(ctx, `SELECT relname, n_tup_upd, n_tup_hot_upd, pg_relation_size(relid)
		FROM pg_stat_user_tables WHERE relname IN ('kv_entries', 'kv_fields') ORDER BY relname`)
	if err != nil {
		t.Fatal(err)
	}
	var name string
	var upd, hot, bytes int64
	_, err = pgx.ForEachRow(rows, []any{&name, &upd, &hot, &bytes}, func() error {
		t.Logf("%s: %d updates, %d HOT, %d kB", name, upd, hot, bytes/1024)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// formerWriteFields is writeFields as it was before branch p6-pgfixed
// (2026-11-24): its delete, update and insert each probe kv_fields'
// indexes, and the fallback branch is there in every batch ($8).
// TestApplyCostParts measures the statement against it.
const formerWriteFields = `
WITH g AS MATERIALIZED (
    SELECT e.key, e.live, e.expires_at, CASE WHEN e.key = ANY($8::text[]) THEN e.value END AS value
    FROM unnest($1::text[], $2::bigint[]) AS t(k, v)
    JOIN kv_entries e ON e.key = t.k AND e.version = t.v
), n AS MATERIALIZED (
    SELECT g.key, f.field, f.type, f.num, f.str, g.expires_at
    FROM (
        SELECT k, field, type::"char" AS type, num::numeric AS num, str
        FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) AS f(k, field, type, num, str)
    ) f
    JOIN g ON g.key = f.k
    WHERE g.live AND (f.num IS NULL OR length(f.num::text) <= 256)
    UNION ALL
    SELECT g.key, f.field, f.type, f.num, f.str, g.expires_at
    FROM g CROSS JOIN LATERAL kv_value_fields(g.value::jsonb) AS f
    WHERE g.live AND g.value IS NOT NULL
), del AS (
    DELETE FROM kv_fields f
    WHERE f.key = ANY(ARRAY(SELECT key FROM g))
        AND NOT EXISTS (SELECT 1 FROM n WHERE n.key = f.key AND n.field = f.field)
), upd AS (
    UPDATE kv_fields f SET type = n.type, num = n.num, str = n.str, expires_at = n.expires_at
    FROM n
    WHERE f.key = n.key AND f.field = n.field
        AND (f.type, f.num::text, f.str, f.expires_at) IS DISTINCT FROM (n.type, n.num::text, n.str, n.expires_at)
)
INSERT INTO kv_fields (key, field, type, num, str, expires_at)
SELECT n.key, n.field, n.type, n.num, n.str, n.expires_at FROM n
WHERE NOT EXISTS (SELECT 1 FROM kv_fields f WHERE f.key = n.key AND f.field = n.field)`
