package projection_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// loadLog is a log of two partitions that takes each of Load's paths:
// runs copied whole; a declaration and collection events (applied)
// amid them; keys written before their scope declares fields and after;
// keys and events seen again in a later batch (the copy meets them and
// the run is applied instead); a replay and a key's two versions in one
// run; deletes, expiries, TTLs, values with tabs, newlines, backslashes
// and escapes, non-object values, numbers with an exponent or longer
// than kv_fields' cap, more fields than it keeps. Each batch ends with a
// transaction marker.
func loadLog(tb testing.TB) [][]projection.Applied {
	tb.Helper()
	const a, b = "tenant/t/project/a/", "tenant/t/project/b/"
	ttl := t0.Add(time.Hour + 789*time.Nanosecond) // below the microsecond: dropped, as pgx drops it
	withTTL := func(e contract.Event) contract.Event { e.ExpiresAt = &ttl; return e }
	long := `{"n":1` + strings.Repeat("0", 300) + `}`
	var many strings.Builder
	many.WriteString(`{"state":"many"`)
	for i := range 70 {
		fmt.Fprintf(&many, `,"f%02d":%d`, i, i)
	}
	many.WriteString(`}`)
	del := event(tb, contract.KindDelete, a+"gone", 2, "")
	exp := event(tb, contract.KindExpire, a+"ttl", 2, "")
	var part int32
	var offset int64
	batch := func(evs ...contract.Event) []projection.Applied {
		out := make([]projection.Applied, 0, len(evs)+1)
		for _, e := range evs {
			out = append(out, projection.Applied{Partition: part, Offset: offset, Event: e})
			offset++
		}
		out = append(out, projection.Applied{Partition: part, Offset: offset, Marker: true})
		offset++
		return out
	}
	first := batch(
		put(tb, a+"k1", 1, `{"state":"x","n":1,"t":"tab\there\\back\nnew\rcr","u":"\u00e9\ud83d\ude00"}`),
		put(tb, a+"k2", 1, "{\"state\":\t\"ws\",\n\"n\": 2.50}"),
		put(tb, a+"arr", 1, `[1,2]`),
		put(tb, a+"exp", 1, `{"n":1e3,"state":"e"}`),
		put(tb, a+"long", 1, long),
		put(tb, a+"many", 1, many.String()),
		put(tb, a+"null", 1, `null`),
		put(tb, a+"gone", 1, `{"state":"soon gone"}`),
		withTTL(put(tb, a+"ttl", 1, `{"state":"expiring"}`)),
		withTTL(put(tb, a+"ttl2", 1, `{"state":"expiring","n":-0}`)),
	)
	second := batch(
		put(tb, a+"k3", 1, `{"state":"before"}`),
		put(tb, contract.FieldIndexesKey("tenant/t/project/a"), 1, `{"fields":["state","n","t","u"]}`),
		setEvent(tb, a+"set", 1, contract.ElementAdd, "m1", 1, 1),
		setEvent(tb, a+"set", 2, contract.ElementAdd, "m2", 2, 1),
		put(tb, a+"k4", 1, `{"state":"after","n":4}`),
		put(tb, a+"k4", 2, `{"state":"after2","n":5}`), // two versions in one run
		put(tb, a+"k5", 1, `{"state":"after"}`),
		put(tb, a+"k5", 1, `{"state":"after"}`), // a replay in the run
		del,
	)
	third := batch( // seen before: the copy fails, Apply writes it
		put(tb, a+"k1", 2, `{"state":"y"}`),
		put(tb, a+"k6", 1, `{"state":"new"}`),
		exp,
	)
	fourth := batch(put(tb, a+"k6", 1, `{"state":"new"}`)) // a replay alone
	part, offset = 1, 0
	fifth := batch(
		put(tb, contract.FieldIndexesKey("tenant/t/project/b"), 1, `{"fields":["state"]}`),
		put(tb, b+"k1", 1, `{"state":"b1","n":1}`),
		withTTL(put(tb, b+"k2", 1, `{"state":"b2"}`)),
		setEvent(tb, b+"set", 1, contract.ElementAdd, "m", 1, 1),
		setEvent(tb, b+"set", 2, contract.ElementRemove, "m", 0, 1),
		put(tb, b+"k3", 1, `{"other":"b3"}`),
	)
	return [][]projection.Applied{first, second, third, fourth, fifth}
}

// TestLoadEqualsApply: a rebuild's Load into an empty projection (with
// DeferIndexes and Restore around it) writes the same rows as Apply
// writes of the same batches, in every table a rebuild writes
// (kv_entries, kv_history, kv_fields of the declared fields only,
// kv_elements, kv_field_indexes, projector_offsets), in both history
// formats, and ends with the same indexes.
func TestLoadEqualsApply(t *testing.T) {
	t.Parallel()
	for _, format := range []projection.HistoryFormat{projection.HistoryText, projection.HistoryJSONB} {
		t.Run(fmt.Sprint(format), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pg := testenv.MustPostgresDB(t)
			log := loadLog(t)
			var err error
			applied := projection.New(pg.Pool)
			applied.SetHistoryFormat(format)
			for _, b := range log {
				mustApply(t, applied, topic, b)
			}
			// The fields declared over keys written before are built as
			// a projector builds them: then both sides hold them all.
			for more := true; more; {
				if more, err = applied.Backfill(ctx, []int32{0, 1}, 3); err != nil {
					t.Fatalf("backfill: %v", err)
				}
			}
			loaded := projection.New(pg.MustSchema(t, "loaded"))
			loaded.SetHistoryFormat(format)
			d, err := loaded.DeferIndexes(ctx)
			if err != nil || d == nil {
				t.Fatalf("DeferIndexes: %v, %v", d, err)
			}
			for _, b := range log {
				if err := loaded.Load(ctx, topic, b); err != nil {
					t.Fatalf("load: %v", err)
				}
			}
			if err := d.Restore(ctx); err != nil {
				t.Fatalf("restore: %v", err)
			}
			for table, cols := range map[string]string{
				"kv_entries":        "*",
				"kv_history":        "key, version, kind, op, ts, partition, kafka_offset, event, event_text, request_id",
				"kv_fields":         "*",
				"kv_elements":       "*",
				"kv_field_indexes":  "scope, field, partition, backfill_after",
				"projector_offsets": "topic, partition, next_offset",
			} {
				sel := func(schema string) string {
					return `SELECT ` + cols + ` FROM ` + pgx.Identifier{schema, table}.Sanitize()
				}
				var rows, differing int64
				if err := pg.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM (`+sel("public")+`) t), (SELECT count(*) FROM (
					(`+sel("loaded")+` EXCEPT ALL `+sel("public")+`) UNION ALL (`+sel("public")+` EXCEPT ALL `+sel("loaded")+`)) d)`).Scan(&rows, &differing); err != nil {
					t.Fatalf("%s: %v", table, err)
				}
				if rows == 0 || differing != 0 {
					t.Errorf("%s: %d rows applied, %d on one side only; want some, and none", table, rows, differing)
				}
			}
			var undeclared int64
			if err := pg.Pool.QueryRow(ctx, `SELECT count(*) FROM loaded.kv_fields f
				WHERE NOT EXISTS (SELECT FROM loaded.kv_field_indexes i WHERE f.key LIKE i.scope || '/%' AND i.field = f.field)`).Scan(&undeclared); err != nil {
				t.Fatal(err)
			}
			if undeclared != 0 {
				t.Errorf("kv_fields holds %d rows of fields not declared", undeclared)
			}
			if want, got := indexDefs(t, pg.Pool, "public"), indexDefs(t, pg.Pool, "loaded"); want != got {
				t.Errorf("indexes after Restore:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// indexDefs lists schema's indexes and their definitions, schema left
// out.
func indexDefs(tb testing.TB, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, schema string) string {
	tb.Helper()
	rows, err := pool.Query(context.Background(), `SELECT indexname || ': ' || replace(indexdef, $1 || '.', '')
		FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname`, schema)
	if err != nil {
		tb.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatal(err)
	}
	return strings.Join(defs, "\n")
}
