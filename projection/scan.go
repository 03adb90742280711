package projection

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/contract"
)

// A filtered scan of a declared and ready field reads kv_fields
// (schemas/postgres/00004_kv_fields.sql), never the values: the entries of a page are fetched by key at the end
// (key = ANY (ARRAY(...)): an index lookup per key, whatever the planner
// guesses of the page's size).
//
// Two btree paths serve "prefix, field op value, ORDER BY key LIMIT n",
// and each is slow where the other is fast:
//
//   - key first, kv_fields' primary key (field, key): rows of the field
//     in key order, each checked; stops after n matches. Fast when
//     matches are dense, a read of the whole prefix when they are rare.
//   - value first, kv_fields_num_scoped / kv_fields_str_scoped (the hash
//     of the key's scope, the type and the field, then value, key):
//     exactly the matches in the prefix's project, then a sort by key.
//     Fast when matches are rare, a read of every match of the project
//     when they are many.
//
// The planner cannot choose well: it has no statistics per field (one
// histogram of str mixes states, names and timestamps), and how matches
// fall in key order is not in any statistic. So one statement does both,
// in order: it probes the first probe rows of the field in key order; if
// that finds n matches, or the prefix has no more rows, the probe is the
// answer. Only otherwise, when the matches are fewer than about one in ten,
// does the value-first path run (a one-time filter skips it when the probe
// decided). A scan then costs at most the probe plus the matches in the
// prefix; the remaining slow case is many matches that all sort after the
// probe's rows.

// scanProbe is how many rows of the field, at least, a scan reads in key
// order before it goes by value; it grows to ten times the page.
const scanProbe = 1000

// scanSettings apply to the scan statement sent after them in the same
// batch (one implicit transaction, set_config is_local): a custom plan
// for the scan's actual bounds, and no JIT compilation or parallel
// workers, which cost more than a scan of a few thousand index rows
// (tens of milliseconds each on a small host).
const scanSettings = `SELECT set_config('plan_cache_mode', 'force_custom_plan', true),
    set_config('jit', 'off', true),
    set_config('max_parallel_workers_per_gather', '0', true)`

// A field that its scope does not declare, or whose index is still
// building (kv_field_indexes, migration 00017), has no kv_fields rows to
// read (or not all of them yet): the scan reads the values instead, in
// the same statement (so in the same snapshot, and the choice of path
// too), bounded: the entries under the prefix after the cursor in key
// order, at most fallbackBudget of them and fallbackBytes of their stored
// values, each matched on kv_value_fields of its value, the very rows the
// index would hold, so both paths answer alike. When the budget runs out
// before the prefix does, the page ends there with what matched (fewer
// than the limit, or none) and the key of the last entry read is the
// next page's cursor, as a DynamoDB Scan does: a client follows cursors
// until there is none, not until a page is short.

// fallbackBudget returns how many entries a scan without an index reads
// for a page of limit: ten per item asked, at least 1,000, at most
// 10,000.
func fallbackBudget(limit int) int {
	return min(max(1000, 10*limit), 10_000)
}

// fallbackBytes bounds the stored bytes of the values a scan without an
// index reads for one page (pg_column_size: compressed as stored), the
// first entry's always.
const fallbackBytes = 16 << 20

// scanStatement returns the statement of a scan and its arguments, or ""
// when nothing can match (keys are ASCII).
func scanStatement(prefix string, f Filter, pg Page) (string, []any, error) {
	after, limit, maxBytes, now := pg.After, pg.Limit, pg.MaxBytes, pg.Now
	if err := checkPage(limit, maxBytes); err != nil {
		return "", nil, err
	}
	v, err := operandOf(&f)
	if err != nil {
		return "", nil, err
	}
	if err := checkCursor(after); err != nil {
		return "", nil, err
	}
	if !ascii(prefix) {
		return "", nil, nil
	}
	end, ok := prefixEnd(prefix)
	if !ok {
		end = "\x7f" // above every key: keys are printable ASCII
	}
	n := int64(limit) + 1
	return scanSQL(f.Op, v.typ), []any{f.Field, v.text, prefix, after, end, now, n, max(scanProbe, 10*n), maxBytes, prefixScope(prefix),
		fallbackBudget(limit), fallbackBytes}, nil
}

// prefixScope is the scope (tenant/<t>/project/<p>) every key under
// prefix has, or nil when prefix does not name one (it has no fourth
// '/'; a listing's always does: contract.ValidatePrefix).
func prefixScope(prefix string) *string {
	n := 0
	for i := range len(prefix) {
		if prefix[i] == '/' {
			if n++; n == 4 {
				s := prefix[:i]
				return &s
			}
		}
	}
	return nil
}

// scanSQL is the scan statement for comparisons op of a value of type
// typ (kv_fields.type). Parameters: $1 field, $2 value, $3 prefix, $4
// cursor, $5 end of the prefix range, $6 now, $7 page size + 1, $8 probe
// size, $9 byte budget (see List), $10 the prefix's scope (NULL when it
// names none): the value-first path reads the scoped indexes
// kv_fields_num_scoped and kv_fields_str_scoped (kv_field_group of the
// scope, type and field, then value, key; migration 00021), so only the
// scope's matches, and checks the field and type they INCLUDE (a hash
// two groups share costs rows read, not a wrong row) and the key range
// (which the scope's keys hold); $11 and $12 the
// entries and bytes a scan without an index reads (fallbackBudget,
// fallbackBytes).
//
// ready says which path answers: kv_fields when the scope declares the
// field and it is ready, else the values (scanned). Each path's parts
// are skipped by a one-time filter when the other answers. The rows are
// a page's (pageColumns) and stop; a last row with stop true, when the
// values' budget ran out, carries the key of the last entry read.
func scanSQL(op contract.FilterOp, typ string) string {
	match := "f.type = '" + typ + "' AND f.str " + opSQL[op] + " $2::text"
	if typ == "n" {
		match = "f.type = 'n' AND f.num " + opSQL[op] + " $2::numeric"
	}
	const in = `f.field = $1 AND f.key >= $3 AND f.key > $4 AND f.key < $5`
	const inByValue = `f.field = $1 AND f.key COLLATE "POSIX" >= $3 AND f.key COLLATE "POSIX" > $4 AND f.key COLLATE "POSIX" < $5`
	const unexpired = `(f.expires_at IS NULL OR f.expires_at > $6)`
	return `
WITH ready AS (
    SELECT EXISTS (SELECT FROM kv_field_indexes
        WHERE scope = $10::text AND field = $1 AND backfill_after IS NULL) AS yes
), probe AS MATERIALIZED (
    SELECT f.key, ` + match + ` AND ` + unexpired + ` AS hit
    FROM kv_fields f
    WHERE (SELECT yes FROM ready) AND ` + in + `
    ORDER BY f.key
    LIMIT $8
), near AS (
    SELECT key FROM probe WHERE hit ORDER BY key LIMIT $7
), decided AS (
    SELECT (SELECT count(*) FROM near) = $7 OR (SELECT count(*) FROM probe) < $8 AS yes
), far AS (
    -- By value: the key's bounds and order are written in collation
    -- POSIX, the same byte order as the column's C but no index's, so
    -- they cannot make the primary key (field, key) look cheap. Postgres
    -- estimates a prefix's range from the key's histogram, and a
    -- project whose keys hold no bound of it (100 buckets, 100 projects
    -- of 4 fields) looks like a row or two: the planner then walked
    -- every row of the project's field in key order (figure 23c, 10
    -- million keys: 100,000 rows read for 1,000 matches). (key || ''
    -- did the same at the cost of a string built per row.)
    SELECT f.key FROM kv_fields f
    WHERE NOT (SELECT yes FROM decided) AND ` + inByValue + ` AND ` + match + ` AND ` + unexpired + `
        AND kv_field_group(f.field, f.type, kv_key_scope(f.key)) = kv_field_group($1, '` + typ + `', $10::text)
    ORDER BY f.key COLLATE "POSIX"
    LIMIT $7
), scanned AS (
    -- Read lazily: slow stops pulling rows at its limit.
    SELECT x.key, x.within, x.within AND (x.expires_at IS NULL OR x.expires_at > $6)
        AND EXISTS (SELECT FROM kv_value_fields(x.value::jsonb) f WHERE f.field = $1 AND ` + match + `) AS hit
    FROM (
        SELECT e.key, e.value, e.expires_at,
            row_number() OVER w <= $11 AND (row_number() OVER w = 1 OR sum(pg_column_size(e.value)) OVER w <= $12) AS within
        FROM kv_entries e
        WHERE NOT (SELECT yes FROM ready) AND e.live AND e.key >= $3 AND e.key > $4 AND e.key < $5
        WINDOW w AS (ORDER BY e.key)
        ORDER BY e.key
        LIMIT $11 + 1
    ) x
), slow AS MATERIALIZED (
    SELECT key FROM scanned WHERE hit LIMIT $7
), stop AS (
    SELECT max(key) FILTER (WHERE within) AS key, bool_or(NOT within) AS cut
    FROM scanned WHERE (SELECT count(*) FROM slow) < $7
), hits AS (
    SELECT key FROM near WHERE (SELECT yes FROM decided)
    UNION ALL
    SELECT key FROM far
    UNION ALL
    SELECT key FROM slow
)
SELECT ` + pageColumns + `, false AS stop FROM (
    SELECT ` + pageFits("$9") + ` FROM kv_entries
    WHERE key = ANY (ARRAY(SELECT key FROM hits)) AND live AND (expires_at IS NULL OR expires_at > $6)
    WINDOW page_order AS (ORDER BY key)
) page
UNION ALL
SELECT key, 0, false, NULL, NULL, now(), NULL, '', '', '', '', '{}'::jsonb, false, true FROM stop WHERE cut
ORDER BY key, stop`
}

// Scan is List with a filter: the live entries whose key starts with
// prefix and sorts after the cursor pg.After, not expired at pg.Now,
// whose value matches f (see Filter), in byte order of their keys, at
// most pg.Limit of them and no more than fit in pg.MaxBytes (see List).
// next is the cursor of the next page, "" when no more can match: the
// last entry's key when more matches follow, or, when the field has no
// ready index and the page's budget of values ran out first, the key of
// the last entry read (the page may then hold fewer entries than the
// limit, or none). A declared and ready field is answered by its index
// (kv_fields), and values are not read.
// An invalid filter is an *contract.Error with code invalid naming "field",
// "op" or "value".
func (s *Store) Scan(ctx context.Context, prefix string, f Filter, pg Page) (entries []contract.Entry, next string, err error) {
	sql, args, err := scanStatement(prefix, f, pg)
	if err != nil || sql == "" {
		return nil, "", err
	}
	b := &pgx.Batch{}
	b.Queue(scanSettings)
	b.Queue(sql, args...)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, "", translate("scan", err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, "", translate("scan", err)
	}
	if entries, next, err = readScanPage(rows, pg.Limit); err != nil {
		return nil, "", err
	}
	if err := br.Close(); err != nil {
		return nil, "", translate("scan", err)
	}
	return entries, next, nil
}

// readScanPage reads the rows of scanSQL as readPage reads listSQL's,
// and closes rows: next is the last entry's key when a further match
// was there, else the stop row's key, if any.
func readScanPage(rows pgx.Rows, limit int) (entries []contract.Entry, next string, err error) {
	defer rows.Close()
	entries = make([]contract.Entry, 0, min(limit, 1024))
	cache := make(semCache)
	for rows.Next() {
		var fits, stop bool
		st, err := scanStateCached(rows, cache, &fits, &stop)
		if err != nil {
			return nil, "", translate("scan", err)
		}
		if stop {
			next = st.Entry.Key
			break
		}
		if len(entries) == limit || !fits {
			next = entries[len(entries)-1].Key
			break
		}
		entries = append(entries, st.Entry)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, "", translate("scan", err)
	}
	return entries, next, nil
}
