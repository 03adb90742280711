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

// deferredTables are the tables whose secondary indexes a rebuild defers.
var deferredTables = []string{"kv_entries", "kv_history", "kv_fields"}

// DeferredIndexes are the secondary indexes DeferIndexes dropped.
type DeferredIndexes struct {
	s *Store
	// Names and Defs are the indexes' names and CREATE INDEX statements.
	Names, Defs []string
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
SELECT i.relname, pg_get_indexdef(x.indexrelid)
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
			var name, def string
			if err := rows.Scan(&name, &def); err != nil {
				return err
			}
			d.Names, d.Defs = append(d.Names, name), append(d.Defs, def)
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
	return d, nil
}

// restoreParallel is how many indexes Restore builds at once.
const restoreParallel = 2

// Restore creates the indexes DeferIndexes dropped, restoreParallel at
// a time, each with a larger maintenance_work_mem (its sort), then
// analyzes the tables. A nil d does nothing.
func (d *DeferredIndexes) Restore(ctx context.Context) error {
	if d == nil {
		return nil
	}
	work := make(chan int)
	errs := make([]error, len(d.Defs))
	var wg sync.WaitGroup
	for range restoreParallel {
		wg.Go(func() {
			for i := range work {
				errs[i] = d.create(ctx, i)
			}
		})
	}
	for i := range d.Defs {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	_, err := d.s.pool.Exec(ctx, `ANALYZE kv_entries, kv_history, kv_fields`)
	return translate("restore indexes: analyze", err)
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
