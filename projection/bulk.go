package projection

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// A rebuild folds the whole log into an empty projection. Each secondary
// index of kv_entries, kv_history and kv_fields (the ones no Apply
// statement needs: not unique, so no ON CONFLICT reads them, and no
// statement of Apply looks rows up through them) would take an entry per
// row as it goes, a random insert into a growing btree; built once at the
// end, each is one sort of the table. DeferIndexes drops them and
// DeferredIndexes.Restore creates them again from their own definitions
// (pg_get_indexdef), so the rebuilt projection has the same indexes as a
// migrated one, and the same rows as an Apply of every event.
//
// kv_fields is deferred too: it is derived from kv_entries alone (each
// live entry's kv_value_fields of the fields its scope declares,
// migrations 00004 and 00017), so Apply leaves it alone
// during the rebuild and Restore derives it once from the rebuilt
// entries, as migration 00004 did, instead of bringing a key's rows up to
// date at each of its batches. valueFields, which Apply derives them
// with, agrees with kv_value_fields (fields.go), so the rows are the same.

// deferredTables are the tables whose secondary indexes a rebuild defers.
var deferredTables = []string{"kv_entries", "kv_history", "kv_fields"}

// DeferredIndexes are the secondary indexes DeferIndexes dropped.
type DeferredIndexes struct {
	s *Store
	// Names and Defs are the indexes' names and CREATE INDEX statements.
	Names, Defs []string
	// tables are their tables.
	tables []string
}

// DeferIndexes drops the secondary indexes of kv_entries, kv_history and
// kv_fields when the projection holds no entry and no history (a
// rebuild's fresh schema), and returns them for Restore; nil when the
// projection is not empty (nothing is dropped).
func (s *Store) DeferIndexes(ctx context.Context) (*DeferredIndexes, error) {
	d := &DeferredIndexes{s: s}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var empty bool
		if err := tx.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM kv_entries) AND NOT EXISTS (SELECT 1 FROM kv_history)`).Scan(&empty); err != nil {
			return err
		}
		if !empty {
			d = nil
			return nil
		}
		rows, err := tx.Query(ctx, `
SELECT i.relname, pg_get_indexdef(x.indexrelid), t.relname
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
WHERE t.relnamespace = current_schema()::regnamespace AND t.relname = ANY($1)
    AND NOT x.indisunique AND NOT x.indisprimary AND NOT x.indisexclusion
ORDER BY i.relname`, deferredTables)
		if err != nil {
			return err
		}
		for rows.Next() {
			var name, def, table string
			if err := rows.Scan(&name, &def, &table); err != nil {
				return err
			}
			d.Names, d.Defs, d.tables = append(d.Names, name), append(d.Defs, def), append(d.tables, table)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, name := range d.Names {
			if _, err := tx.Exec(ctx, `DROP INDEX `+pgx.Identifier{name}.Sanitize()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, translate("defer indexes", err)
	}
	if d != nil {
		s.deferFields = true
		s.forget(nil)
	}
	return d, nil
}

// deriveFields fills kv_fields from the live entries of kv_entries of
// the partitions p with p % n = slice, as migration 00004 did, for the
// fields their scopes declare (kv_field_indexes, which the rebuild's
// Apply kept: fieldindexes.go) only.
func (d *DeferredIndexes) deriveFields(ctx context.Context, slice, n int) error {
	_, err := d.s.pool.Exec(ctx, `
INSERT INTO kv_fields (key, field, type, num, str, expires_at)
SELECT e.key, f.field, f.type, f.num, f.str, e.expires_at
FROM kv_entries e
CROSS JOIN LATERAL kv_value_fields(e.value::jsonb) AS f
WHERE e.live AND e.partition % $2 = $1
    AND e.scope IN (SELECT scope FROM kv_field_indexes)
    AND EXISTS (SELECT FROM kv_field_indexes i WHERE i.scope = e.scope AND i.field = f.field)
ORDER BY e.key, f.field`, slice, n)
	return translate("restore: derive kv_fields", err)
}

// restoreParallel is how many statements Restore runs at once, and
// fieldSlices in how many parts it derives kv_fields.
const (
	restoreParallel = 2
	fieldSlices     = 4
)

// Restore derives kv_fields from kv_entries (in fieldSlices parts) while
// it creates the indexes of kv_entries and kv_history that DeferIndexes
// dropped, then those of kv_fields, restoreParallel statements at a
// time, each index with a larger maintenance_work_mem (its sort); then
// it analyzes the tables, and Apply writes kv_fields again. Apply must
// not run meanwhile. A nil d does nothing.
func (d *DeferredIndexes) Restore(ctx context.Context) error {
	if d == nil {
		return nil
	}
	var first, then []func(context.Context) error
	for slice := range fieldSlices {
		first = append(first, func(ctx context.Context) error { return d.deriveFields(ctx, slice, fieldSlices) })
	}
	for i := range d.Defs {
		job := func(ctx context.Context) error { return d.create(ctx, i) }
		if d.tables[i] == "kv_fields" {
			then = append(then, job)
		} else {
			first = append(first, job)
		}
	}
	if err := runJobs(ctx, first); err != nil {
		return err
	}
	if err := runJobs(ctx, then); err != nil {
		return err
	}
	// Every declared field's rows are now derived: all are ready.
	if _, err := d.s.pool.Exec(ctx, `UPDATE kv_field_indexes SET backfill_after = NULL WHERE backfill_after IS NOT NULL`); err != nil {
		return translate("restore: field indexes ready", err)
	}
	if _, err := d.s.pool.Exec(ctx, `ANALYZE kv_entries, kv_history, kv_fields, kv_field_indexes`); err != nil {
		return translate("restore indexes: analyze", err)
	}
	d.s.deferFields = false
	return nil
}

// runJobs runs jobs restoreParallel at a time and returns the first
// error; the jobs after a failed one are not started.
func runJobs(ctx context.Context, jobs []func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan func(context.Context) error)
	var wg sync.WaitGroup
	for range restoreParallel {
		wg.Go(func() {
			for job := range work {
				if err := job(ctx); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for _, job := range jobs {
		select {
		case work <- job:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// create builds index i in a transaction of its own.
func (d *DeferredIndexes) create(ctx context.Context, i int) error {
	err := pgx.BeginFunc(ctx, d.s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL maintenance_work_mem = '256MB'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, d.Defs[i])
		return err
	})
	return translate(fmt.Sprintf("restore index %s", d.Names[i]), err)
}
