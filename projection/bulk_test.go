package projection_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestDeferIndexes: on an empty projection the secondary indexes of
// kv_entries, kv_history and kv_fields are dropped and Apply leaves
// kv_fields alone; Restore brings back the same indexes and the kv_fields
// rows Apply would have written. A projection that holds entries is left
// as it is.
func TestDeferIndexes(t *testing.T) {
	t.Parallel()
	pg := testenv.MustPostgresDB(t)
	ctx := context.Background()
	// list returns the strings query (ORDER BY 1) selects of schema ($1).
	list := func(query, schema string) []string {
		rows, err := pg.Pool.Query(ctx, query, schema)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	indexes := func(schema string) []string {
		return list(`SELECT indexname FROM pg_indexes WHERE schemaname = $1 ORDER BY 1`, schema)
	}
	fields := func(schema string) int64 {
		var n int64
		if err := pg.Pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "kv_fields"}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	batch := batchOf(0, put(t, contract.FieldIndexesKey("tenant/t/project/p"), 1, `{"fields":["state","n","ok","x"]}`),
		put(t, "tenant/t/project/p/a", 1, `{"state":"done","n":1}`), put(t, "tenant/t/project/p/b", 1, `{"state":"failed"}`),
		put(t, "tenant/t/project/p/a", 2, `{"state":"running","n":2.50,"ok":true}`))
	migrated := indexes("public")
	mustApply(t, projection.New(pg.Pool), "kv.changes", batch)

	s := projection.New(pg.MustSchema(t, "bulk"))
	d, err := s.DeferIndexes(ctx)
	if err != nil || d == nil || len(d.Names) < 9 || slices.Contains(indexes("bulk"), "kv_fields_field_key") {
		t.Fatalf("DeferIndexes: %v, %v; left %v", d, err, indexes("bulk"))
	}
	mustApply(t, s, "kv.changes", batch)
	if n := fields("bulk"); n != 0 {
		t.Errorf("kv_fields has %d rows while deferred, want 0", n)
	}
	if err := d.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if got := indexes("bulk"); !slices.Equal(got, migrated) {
		t.Errorf("indexes after Restore %v, want %v", got, migrated)
	}
	constraints := func(schema string) []string {
		return list(`SELECT c.conname || ' ' || pg_get_constraintdef(c.oid) FROM pg_constraint c
JOIN pg_class t ON t.oid = c.conrelid WHERE t.relnamespace = $1::regnamespace ORDER BY 1`, schema)
	}
	if got, want := constraints("bulk"), constraints("public"); !slices.Equal(got, want) || !slices.Contains(got, "kv_fields_pkey PRIMARY KEY (key, field)") {
		t.Errorf("constraints after Restore %q, want %q with kv_fields' primary key", got, want)
	}
	const cols = `key, field, type, num, str, expires_at`
	var differing int64
	if err := pg.Pool.QueryRow(ctx, `SELECT count(*) FROM ((SELECT `+cols+` FROM bulk.kv_fields EXCEPT SELECT `+cols+` FROM public.kv_fields)
		UNION ALL (SELECT `+cols+` FROM public.kv_fields EXCEPT SELECT `+cols+` FROM bulk.kv_fields)) d`).Scan(&differing); err != nil {
		t.Fatal(err)
	}
	if n := fields("public"); n != 4 || differing != 0 {
		t.Errorf("kv_fields: %d rows applied, %d differing from the restored ones; want 4 and 0", n, differing)
	}
	mustApply(t, s, "kv.changes", batchOf(4, put(t, "tenant/t/project/p/c", 1, `{"x":1}`)))
	if fi, err := s.FieldIndexes(ctx, "tenant/t/project/p"); err != nil || len(fi) != 4 || !fi[0].Ready || !fi[3].Ready {
		t.Errorf("declarations after Restore: %+v, %v; want 4, ready", fi, err)
	}
	if n := fields("bulk"); n != 5 {
		t.Errorf("kv_fields after Restore and one more put: %d rows, want 5 (Apply writes it again)", n)
	}
	if d, err := s.DeferIndexes(ctx); err != nil || d != nil || !slices.Equal(indexes("bulk"), migrated) {
		t.Errorf("DeferIndexes of a projection holding entries: %v, %v; want nil, nothing dropped", d, err)
	}
}
