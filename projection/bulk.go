package projection

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
	// tables are their tables; keyCols their key columns' counts
	// (Restore starts the widest first).
	tables  []string
	keyCols []int
	// constraints are the statements that turn built indexes back into
	// the constraints DeferIndexes dropped, run once every index is
	// built.
	constraints []string
	// Took is how long each of Restore's steps took, by name, for the
	// rebuild's log.
	Took map[string]time.Duration
	mu   sync.Mutex
	// streams is deriveStreams, but in tests.
	streams int
}

// timed runs job and records how long it took as name.
func (d *DeferredIndexes) timed(ctx context.Context, name string, job func(context.Context) error) error {
	start := time.Now()
	err := job(ctx)
	d.mu.Lock()
	if d.Took == nil {
		d.Took = make(map[string]time.Duration)
	}
	d.Took[name] = time.Since(start)
	d.mu.Unlock()
	return err
}

// DeferIndexes drops the secondary indexes of kv_entries, kv_history and
// kv_fields when the projection holds no entry and no history (a
// rebuild's fresh schema), and returns them for Restore; nil when the
// projection is not empty (nothing is dropped).
func (s *Store) DeferIndexes(ctx context.Context) (*DeferredIndexes, error) {
	d := &DeferredIndexes{s: s, streams: deriveStreams}
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
SELECT i.relname, pg_get_indexdef(x.indexrelid), t.relname, x.indnkeyatts
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
			var cols int16
			if err := rows.Scan(&name, &def, &table, &cols); err != nil {
				return err
			}
			d.add(name, def, table, int(cols))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, name := range d.Names {
			if _, err := tx.Exec(ctx, `DROP INDEX `+pgx.Identifier{name}.Sanitize()); err != nil {
				return err
			}
		}
		return d.deferFieldsKey(ctx, tx)
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

// add records a dropped index.
func (d *DeferredIndexes) add(name, def, table string, keyCols int) {
	d.Names, d.Defs = append(d.Names, name), append(d.Defs, def)
	d.tables, d.keyCols = append(d.tables, table), append(d.keyCols, keyCols)
}

// deferFieldsKey drops kv_fields' primary key too, for Restore to add
// again once deriveFields has written every row: no statement of a
// rebuild reads or writes kv_fields before (Apply leaves it alone), and
// deriveFields writes each (key, field) once (valueFields keeps one
// member per name), so adding it back cannot fail, and it is one sort of
// the table instead of an insert into a growing btree per row. Restore
// builds its index with CREATE UNIQUE INDEX, whose lock (SHARE) lets
// kv_fields' other index builds run beside it, and makes it the primary
// key again once they are done (ADD CONSTRAINT … USING INDEX: a catalog
// change). ALTER TABLE … ADD PRIMARY KEY would build it under ACCESS
// EXCLUSIVE, which waits for the builds running and holds up those
// asked for after it: on 2 cores that left one idle for a third of the
// restore (BenchmarkRebuild, 560,000 keys, 2026-11-30). The index keeps
// its name (the constraint's).
func (d *DeferredIndexes) deferFieldsKey(ctx context.Context, tx pgx.Tx) error {
	var name, def string
	err := tx.QueryRow(ctx, `SELECT conname, pg_get_indexdef(conindid) FROM pg_constraint
WHERE conrelid = 'kv_fields'::regclass AND contype = 'p'`).Scan(&name, &def)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `ALTER TABLE kv_fields DROP CONSTRAINT `+pgx.Identifier{name}.Sanitize()); err != nil {
		return err
	}
	// Built last of kv_fields' (its rows come sorted: cheap).
	d.add(name, def, "kv_fields", 0)
	id := pgx.Identifier{name}.Sanitize()
	d.constraints = append(d.constraints, `ALTER TABLE kv_fields ADD CONSTRAINT `+id+` PRIMARY KEY USING INDEX `+id)
	return nil
}

// deriveFieldsSQL derives, as migration 00004 did, the kv_fields rows
// of the live entries of keys, for those of fields their scopes declare
// (kv_field_indexes, which the rebuild's Apply kept: fieldindexes.go):
// the values deriveFields leaves to Postgres.
func deriveFieldsSQL(ctx context.Context, tx pgx.Tx, keys, fields []string) error {
	_, err := tx.Exec(ctx, `
INSERT INTO kv_fields (key, field, type, num, str, expires_at)
SELECT e.key, f.field, f.type, f.num, f.str, e.expires_at
FROM kv_entries e
CROSS JOIN LATERAL kv_value_fields(e.value::jsonb) AS f
WHERE e.key = ANY($1::text[]) AND e.live AND f.field = ANY($2::text[])
    AND EXISTS (SELECT FROM kv_field_indexes i WHERE i.scope = e.scope AND i.field = f.field)`, keys, fields)
	return err
}

// deriveChunk is how many entries deriveFields reads at a time.
const deriveChunk = 10000

// deriveStreams is how many fields one pass of deriveFields sorts its
// rows out to: a temporary file each.
const deriveStreams = 64

// deriveFields fills kv_fields from the live entries of kv_entries, for
// the fields their scopes declare (kv_field_indexes, which the rebuild's
// Apply kept: fieldindexes.go) only, in the order of kv_fields' primary
// key (field, key), which Restore builds next, so that build's sort
// finds its rows sorted (one pass over them, where rows in key order
// cost it a sort of the table: 69.6 s of work at 11 million keys, figure
// 23f of docs/performance.md). It reads the entries in key order
// (through the primary key) with a cursor, deriveChunk at a time,
// derives their fields in Go (valueFields, as Apply does), and writes
// each field's rows to a temporary file of its own, in COPY's text
// format; then it copies the files into kv_fields one after the other,
// fields in byte order, all in one transaction on one connection. The
// files hold the table's rows once, as text, and go when it returns; the
// memory it takes is a chunk's and a buffer per file, whatever the
// table's size. Fields are taken deriveStreams at a time, a pass over
// the entries of the scopes that declare one of them each. The values
// valueFields leaves to Postgres, and numbers whose written-out length
// only numeric knows (an exponent, more than the cap's characters), go
// to deriveFieldsSQL, chunk by chunk, so the rows are those of migration
// 00004's derivation: kv_value_fields of each value. (Those few rows are
// out of order; a sort that finds a run out of order sorts that run.)
func (d *DeferredIndexes) deriveFields(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, d.s.pool, func(tx pgx.Tx) error {
		declared, err := declaredFields(ctx, tx)
		if err != nil || len(declared) == 0 {
			return err
		}
		// A sort of the table would spill to disk: the primary key
		// gives the order.
		if _, err := tx.Exec(ctx, `SET LOCAL enable_sort = off; SET LOCAL enable_seqscan = off`); err != nil {
			return err
		}
		for group := range slices.Chunk(fieldsOf(declared), d.streams) {
			if err := deriveGroup(ctx, tx, declared, group); err != nil {
				return err
			}
		}
		return nil
	})
	return translate("restore: derive kv_fields", err)
}

// fieldsOf returns the fields declared, each once, in byte order.
func fieldsOf(declared map[string][]string) []string {
	var all []string
	for _, fields := range declared {
		all = append(all, fields...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// fieldSpill is where deriveGroup sets one field's rows aside.
type fieldSpill struct {
	buf  bytes.Buffer
	file *os.File
}

// spillAt is how many bytes a fieldSpill buffers before it writes them
// to its file.
const spillAt = 64 << 10

// flush writes what f buffers to its file.
func (f *fieldSpill) flush() error {
	_, err := f.file.Write(f.buf.Bytes())
	f.buf.Reset()
	return err
}

// deriveGroup is one pass of deriveFields: the rows of fields (sorted)
// of every live entry whose scope declares one of them.
func deriveGroup(ctx context.Context, tx pgx.Tx, declared map[string][]string, fields []string) error {
	spills := make(map[string]*fieldSpill, len(fields))
	defer func() {
		for _, f := range spills {
			f.file.Close()
			os.Remove(f.file.Name())
		}
	}()
	for _, field := range fields {
		file, err := os.CreateTemp("", "eskv-rebuild-kv_fields-*")
		if err != nil {
			return err
		}
		spills[field] = &fieldSpill{file: file}
	}
	// Each scope's fields of the group.
	scoped := make(map[string][]string)
	for scope, all := range declared {
		for _, f := range all {
			if _, ok := spills[f]; ok {
				scoped[scope] = append(scoped[scope], f)
			}
		}
	}
	if _, err := tx.Exec(ctx, `DECLARE kv_fields_source NO SCROLL CURSOR FOR
SELECT key, scope, value, expires_at FROM kv_entries
WHERE live AND scope IN (SELECT scope FROM kv_field_indexes WHERE field = ANY($1::text[]))
ORDER BY key`, fields); err != nil {
		return err
	}
	var sqlKeys []string
	var fieldBuf []valueField
	spill := func(field string) *bytes.Buffer { return &spills[field].buf }
	for {
		rows, err := tx.Query(ctx, `FETCH `+strconv.Itoa(deriveChunk)+` FROM kv_fields_source`, pgx.QueryResultFormats{pgx.TextFormatCode})
		if err != nil {
			return err
		}
		read := 0
		for rows.Next() {
			read++
			raw := rows.RawValues()
			key, scope, value, expires := bytesText(raw[0]), bytesText(raw[1]), bytesText(raw[2]), raw[3]
			var ok bool
			fieldBuf, ok = appendFieldRows(spill, key, value, expires, scoped[scope], fieldBuf)
			if !ok {
				sqlKeys = append(sqlKeys, string(key))
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if read == 0 {
			break
		}
		for _, f := range spills {
			if f.buf.Len() >= spillAt {
				if err := f.flush(); err != nil {
					return err
				}
			}
		}
		if len(sqlKeys) > 0 {
			if err := deriveFieldsSQL(ctx, tx, sqlKeys, fields); err != nil {
				return err
			}
			sqlKeys = sqlKeys[:0]
		}
	}
	if _, err := tx.Exec(ctx, `CLOSE kv_fields_source`); err != nil {
		return err
	}
	for _, field := range fields {
		f := spills[field]
		if err := f.flush(); err != nil {
			return err
		}
		if _, err := f.file.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if _, err := tx.Conn().PgConn().CopyFrom(ctx, bufio.NewReaderSize(f.file, spillAt), `COPY kv_fields (key, field, type, num, str, expires_at) FROM STDIN`); err != nil {
			return err
		}
	}
	return nil
}

// declaredFields returns the fields each scope declares, sorted
// (kv_field_indexes).
func declaredFields(ctx context.Context, tx pgx.Tx) (map[string][]string, error) {
	rows, err := tx.Query(ctx, `SELECT scope, array_agg(field ORDER BY field) FROM kv_field_indexes GROUP BY scope`)
	if err != nil {
		return nil, err
	}
	declared := make(map[string][]string)
	var scope string
	var fields []string
	_, err = pgx.ForEachRow(rows, []any{&scope, &fields}, func() error {
		declared[scope] = slices.Clone(fields)
		return nil
	})
	return declared, err
}

// appendFieldRows writes, in COPY's text format, the kv_fields rows of
// key's value (live; expires its expires_at as timestamptz's text, nil
// for NULL) for the declared fields (sorted), each to its field's
// buffer (to). It returns false, writing nothing, when the rows are
// Postgres's to derive: a value valueFields does not decide, or a number
// whose cap numeric decides (it keeps numbers of at most 256 characters
// written out; a plain literal is never shorter than numeric writes it,
// but with an exponent, or longer, it may be).
func appendFieldRows(to func(field string) *bytes.Buffer, key, value string, expires []byte, declared []string, buf []valueField) ([]valueField, bool) {
	if len(declared) == 0 {
		return buf, true
	}
	fields, ok := valueFields(value, buf)
	if !ok {
		return buf, false
	}
	for i := range fields {
		f := &fields[i]
		if f.typ == 'n' && has(declared, f.name) && (len(f.num) > 256 || strings.ContainsAny(f.num, "eE")) {
			return fields[:0], false
		}
	}
	for i := range fields {
		f := &fields[i]
		if !has(declared, f.name) {
			continue
		}
		w := to(f.name)
		copyText(w, key, '\t')
		copyText(w, f.name, '\t')
		w.WriteByte(f.typ)
		w.WriteByte('\t')
		if f.typ == 'n' {
			w.WriteString(f.num)
			w.WriteString("\t\\N\t")
		} else {
			w.WriteString("\\N\t")
			copyText(w, f.str, '\t')
		}
		if expires == nil {
			w.WriteString("\\N")
		} else {
			w.Write(expires)
		}
		w.WriteByte('\n')
	}
	return fields[:0], true
}

// restoreParallel is how many statements Restore runs at once.
const restoreParallel = 2

// buildSortMemory is the maintenance_work_mem of each index build of
// Restore: Postgres's default (see create).
const buildSortMemory = "64MB"

// Restore derives kv_fields from kv_entries and builds the indexes
// DeferIndexes dropped (kv_fields' primary key's too), each sorting in
// buildSortMemory, and analyzes kv_entries and
// kv_history once their indexes are built (ANALYZE then samples their
// expressions too), restoreParallel statements at a time; then it makes
// kv_fields' primary key a constraint again, analyzes kv_fields, and
// Apply writes kv_fields again. Apply must not run meanwhile. A nil d
// does nothing.
//
// Each statement starts as soon as what it needs is done and a
// connection is free, the first ready in this order: the derivation,
// kv_fields' indexes (they wait for it) widest first (most key columns:
// the longest sorts) and its primary key last (its rows come in its
// order), then kv_entries' and kv_history's, then their analyses. So
// the derivation and the longest build run one after the other on one
// connection while the other builds fill the other: no core idles at a
// barrier between the two. (With one, at 11 million keys, the entries'
// and history's builds ended before the derivation and left a core idle
// for 15 s, and kv_fields' last build ran alone: figure 23f of
// docs/performance.md.)
func (d *DeferredIndexes) Restore(ctx context.Context) error {
	if d == nil {
		return nil
	}
	tasks := []task{{run: func(ctx context.Context) error {
		return d.timed(ctx, "derive kv_fields", d.deriveFields)
	}}}
	order := make([]int, len(d.Defs))
	for i := range order {
		order[i] = i
	}
	// kv_fields' first, widest first: the primary key's 0 puts it last.
	slices.SortStableFunc(order, func(a, b int) int {
		if fa, fb := d.tables[a] == "kv_fields", d.tables[b] == "kv_fields"; fa != fb {
			if fa {
				return -1
			}
			return 1
		}
		return d.keyCols[b] - d.keyCols[a]
	})
	built := map[string][]int{}
	for _, i := range order {
		t := task{run: d.job(i)}
		if d.tables[i] == "kv_fields" {
			t.after = []int{0}
		}
		built[d.tables[i]] = append(built[d.tables[i]], len(tasks))
		tasks = append(tasks, t)
	}
	for _, table := range []string{"kv_entries", "kv_history"} {
		tasks = append(tasks, task{after: built[table], run: func(ctx context.Context) error {
			return d.timed(ctx, "analyze "+table, func(ctx context.Context) error {
				_, err := d.s.pool.Exec(ctx, `ANALYZE `+table)
				return translate("restore indexes: analyze "+table, err)
			})
		}})
	}
	if err := runTasks(ctx, tasks); err != nil {
		return err
	}
	for _, stmt := range d.constraints {
		if _, err := d.s.pool.Exec(ctx, stmt); err != nil {
			return translate("restore: constraint", err)
		}
	}
	// Every declared field's rows are now derived: all are ready, and
	// no field has rows left to clear.
	if _, err := d.s.pool.Exec(ctx, `UPDATE kv_field_indexes SET backfill_after = NULL WHERE backfill_after IS NOT NULL;
DELETE FROM kv_field_drops`); err != nil {
		return translate("restore: field indexes ready", err)
	}
	start := time.Now()
	if _, err := d.s.pool.Exec(ctx, `ANALYZE kv_fields, kv_field_indexes`); err != nil {
		return translate("restore indexes: analyze", err)
	}
	d.Took["analyze kv_fields"] = time.Since(start)
	d.s.deferFields = false
	return nil
}

// job is the job that builds index i, timed.
func (d *DeferredIndexes) job(i int) func(context.Context) error {
	return func(ctx context.Context) error {
		return d.timed(ctx, d.Names[i], func(ctx context.Context) error { return d.create(ctx, i) })
	}
}

// task is one of Restore's statements: run, once the tasks after (by
// index) are done.
type task struct {
	run   func(context.Context) error
	after []int
}

// runTasks runs tasks restoreParallel at a time, each once those it
// waits for are done, the first ready in tasks' order first, and returns
// the first error; no task starts after one failed. tasks wait only for
// tasks before them.
func runTasks(ctx context.Context, tasks []task) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	const waiting, running, done = 0, 1, 2
	state := make([]int, len(tasks))
	var mu sync.Mutex
	changed := sync.NewCond(&mu)
	// next returns the first ready task, or -1 when none is left to
	// start (ok false: some wait for others).
	next := func() (int, bool) {
		ok := true
	scan:
		for i, t := range tasks {
			if state[i] != waiting {
				continue
			}
			for _, j := range t.after {
				if state[j] != done {
					ok = false
					continue scan
				}
			}
			return i, true
		}
		return -1, ok
	}
	var wg sync.WaitGroup
	for range restoreParallel {
		wg.Go(func() {
			mu.Lock()
			defer mu.Unlock()
			for ctx.Err() == nil {
				i, ok := next()
				if i < 0 {
					if ok {
						return
					}
					changed.Wait()
					continue
				}
				state[i] = running
				mu.Unlock()
				err := tasks[i].run(ctx)
				mu.Lock()
				state[i] = done
				if err != nil {
					cancel(err)
				}
				changed.Broadcast()
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// create builds index i in a transaction of its own, with no parallel
// workers: Restore already builds restoreParallel indexes at a time, and
// workers under each of them multiply the processes sorting at once
// (their partial sorts then merged by the leader) for CPU it does not
// have; on 2 cores that cost kv_fields' builds about a quarter more
// Postgres CPU (BenchmarkRebuild, 200,000 keys, 2026-11-30).
//
// Its sort gets buildSortMemory, whatever the server's
// maintenance_work_mem: an index of millions of rows sorts outside
// memory anyway, and a smaller memory sorts faster. Each run of the sort
// is quicksorted in memory, and small runs stay in the CPU's caches; the
// merge of more runs costs less than that saves. (psql, 12 million rows
// of figure 23's shape, one build at a time, 2026-12-01:
// kv_fields_str_scoped 12.1–12.7 s with 16 or 64 MB, 14.1 with 128 MB,
// 16.9–17.5 with 256 MB, 25.5–26.9 with 1 GB; kv_fields_num_scoped
// 7.6–10.0 s with 16 or 64 MB, 10.4–10.9 with 256 MB; the primary key,
// whose rows come sorted, 6.5–7.3 s with 64 MB, 8.0–8.5 with 16 or 256
// MB.)
func (d *DeferredIndexes) create(ctx context.Context, i int) error {
	err := pgx.BeginFunc(ctx, d.s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL maintenance_work_mem = '`+buildSortMemory+`'; SET LOCAL max_parallel_maintenance_workers = 0`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, d.Defs[i])
		return err
	})
	return translate(fmt.Sprintf("restore index %s", d.Names[i]), err)
}
