package projection

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/contract"
)

// A filtered scan reads kv_fields (schemas/postgres/00004_kv_fields.sql),
// never the values: the entries of a page are fetched by key at the end
// (key = ANY (ARRAY(...)): an index lookup per key, whatever the planner
// guesses of the page's size).
//
// Two btree paths serve "prefix, field op value, ORDER BY key LIMIT n",
// and each is slow where the other is fast:
//
//   - key first, kv_fields_field_key (field, key): rows of the field in
//     key order, each checked; stops after n matches. Fast when matches
//     are dense, a read of the whole prefix when they are rare.
//   - value first, kv_fields_num_scoped / kv_fields_str_scoped (field,
//     the key's scope, value, key): exactly the matches in the prefix's
//     project, then a sort by key. Fast when matches are rare, a read of
//     every match of the project when they are many.
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
	return scanSQL(f.Op, v.typ), []any{f.Field, v.text, prefix, after, end, now, n, max(scanProbe, 10*n), maxBytes, prefixScope(prefix)}, nil
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
// kv_fields_num_scoped and kv_fields_str_scoped (field, scope, value,
// key; migration 00016), so only the scope's matches.
func scanSQL(op contract.FilterOp, typ string) string {
	match := "f.type = '" + typ + "' AND f.str " + opSQL[op] + " $2::text"
	if typ == "n" {
		match = "f.type = 'n' AND f.num " + opSQL[op] + " $2::numeric"
	}
	const in = `f.field = $1 AND f.key >= $3 AND f.key > $4 AND f.key < $5`
	const unexpired = `(f.expires_at IS NULL OR f.expires_at > $6)`
	return `
WITH probe AS MATERIALIZED (
    SELECT f.key, ` + match + ` AND ` + unexpired + ` AS hit
    FROM kv_fields f
    WHERE ` + in + `
    ORDER BY f.key
    LIMIT $8
), near AS (
    SELECT key FROM probe WHERE hit ORDER BY key LIMIT $7
), decided AS (
    SELECT (SELECT count(*) FROM near) = $7 OR (SELECT count(*) FROM probe) < $8 AS yes
), far AS (
    -- key || '' sorts like key but is no index order, so the planner
    -- picks the index by how few rows its range holds (the value's,
    -- mostly) instead of walking the field in key order.
    SELECT f.key FROM kv_fields f
    WHERE NOT (SELECT yes FROM decided) AND ` + in + ` AND ` + match + ` AND ` + unexpired + `
        AND ($10::text IS NULL OR kv_key_scope(f.key) = $10::text)
    ORDER BY f.key || ''
    LIMIT $7
), hits AS (
    SELECT key FROM near WHERE (SELECT yes FROM decided)
    UNION ALL
    SELECT key FROM far
)
SELECT ` + pageColumns + ` FROM (
    SELECT ` + pageFits("$9") + ` FROM kv_entries
    WHERE key = ANY (ARRAY(SELECT key FROM hits)) AND live AND (expires_at IS NULL OR expires_at > $6)
    WINDOW page_order AS (ORDER BY key)
) page
ORDER BY key`
}

// Scan is List with a filter: the live entries whose key starts with
// prefix and sorts after the cursor after, not expired at now, whose
// value matches f (see Filter), in byte order of their keys, at most
// limit of them and no more than fit in maxBytes (see List); truncated
// reports that more matching entries follow the last one returned. Indexes answer it (kv_fields); values are not read.
// An invalid filter is an *contract.Error with code invalid naming "field",
// "op" or "value".
func (s *Store) Scan(ctx context.Context, prefix string, f Filter, pg Page) (entries []contract.Entry, truncated bool, err error) {
	sql, args, err := scanStatement(prefix, f, pg)
	if err != nil || sql == "" {
		return nil, false, err
	}
	b := &pgx.Batch{}
	b.Queue(scanSettings)
	b.Queue(sql, args...)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, false, translate("scan", err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, false, translate("scan", err)
	}
	if entries, truncated, err = readPage(rows, pg.Limit, "scan"); err != nil {
		return nil, false, err
	}
	if err := br.Close(); err != nil {
		return nil, false, translate("scan", err)
	}
	return entries, truncated, nil
}
