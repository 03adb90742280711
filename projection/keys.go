package projection

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/contract"
)

// keyInfoBytes is about the size of a keys-only item's JSON: its key, its
// purpose and a fixed allowance for version and expiry. It reads neither
// the value nor its header.
const keyInfoBytes = `(octet_length(key) + coalesce(octet_length(semantics->>'purpose'), 0) + 80)`

// keysSQL lists a page of keys with their version, purpose and expiry:
// listSQL's page (the same rows, order, cursor and byte budget rule),
// whose statement never names the value column, so that neither the
// values nor their TOAST chunks are read. Parameters: $1 prefix,
// $2 cursor, $3 now, $4 end of the prefix range, $5 page size + 1,
// $6 byte budget.
const keysSQL = `SELECT key, version, coalesce(semantics->>'purpose', ''), expires_at,
    row_number() OVER page_order = 1 OR sum(` + keyInfoBytes + `) OVER page_order <= $6 AS fits
    FROM kv_entries
    WHERE live AND key >= $1 AND key > $2 AND key < $4 AND (expires_at IS NULL OR expires_at > $3)
    WINDOW page_order AS (ORDER BY key)
    ORDER BY key
    LIMIT $5`

// Keys lists like List the live keys whose key starts with prefix, each
// with its version, purpose and expiry but not its value: at most
// pg.Limit of them and no more than fit in pg.MaxBytes (keyInfoBytes
// each, always the first); truncated says more follow the last one.
func (s *Store) Keys(ctx context.Context, prefix string, pg Page) (items []contract.KeyInfo, truncated bool, err error) {
	if err := checkPage(pg.Limit, pg.MaxBytes); err != nil {
		return nil, false, err
	}
	if err := checkCursor(pg.After); err != nil {
		return nil, false, err
	}
	if !ascii(prefix) {
		return nil, false, nil
	}
	end, ok := prefixEnd(prefix)
	if !ok {
		end = "\x7f"
	}
	rows, err := s.pool.Query(ctx, keysSQL, prefix, pg.After, pg.Now, end, pg.Limit+1, pg.MaxBytes)
	if err != nil {
		return nil, false, translate("keys", err)
	}
	return readKeys(rows, pg.Limit)
}

// readKeys reads up to limit rows of keysSQL, up to the first that does
// not fit the byte budget, and closes rows.
func readKeys(rows pgx.Rows, limit int) (items []contract.KeyInfo, truncated bool, err error) {
	defer rows.Close()
	items = make([]contract.KeyInfo, 0, min(limit, 1024))
	for rows.Next() {
		var (
			k       contract.KeyInfo
			expires *time.Time
			fits    bool
		)
		if err := rows.Scan(&k.Key, &k.Version, &k.Purpose, &expires, &fits); err != nil {
			return nil, false, translate("keys", err)
		}
		if len(items) == limit || !fits {
			truncated = true
			break
		}
		if expires != nil {
			t := expires.UTC()
			k.ExpiresAt = &t
		}
		items = append(items, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, translate("keys", err)
	}
	return items, truncated, nil
}

// KeyRange is the keys from Lo (inclusive) to Hi (exclusive), in byte
// order.
type KeyRange struct{ Lo, Hi string }

// projectsSQL counts the live, unexpired keys of each project (pfx, its
// tenant/t/project/p/ prefix; not named scope, kv_entries' own column)
// that has any in the key range [$1, $2), scopes in key order: a loose
// index scan of kv_entries_live_key, which jumps from each scope to the
// first live key after it (the scope's prefix tenant/t/project/p/ ends
// with '/', so every key after it is at least the prefix with '0' for
// that '/'). A page costs the keys of its projects, not those of the
// whole range. $3 is now, $4 the page size. A scope whose live keys are
// all past their expiry is not counted (count 0) and skipped.
const projectsSQL = `WITH RECURSIVE scopes(pfx) AS (
    SELECT (SELECT substring(key FROM '^tenant/[^/]+/project/[^/]+/') FROM kv_entries
        WHERE live AND key >= $1 AND key < $2 ORDER BY key LIMIT 1)
    UNION ALL
    SELECT (SELECT substring(key FROM '^tenant/[^/]+/project/[^/]+/') FROM kv_entries
        WHERE live AND key >= left(scopes.pfx, -1) || '0' AND key < $2 ORDER BY key LIMIT 1)
    FROM scopes WHERE scopes.pfx IS NOT NULL
)
SELECT pfx, n FROM (
    SELECT s.pfx, (SELECT count(*) FROM kv_entries
        WHERE live AND key >= greatest(s.pfx, $1) AND key < least(left(s.pfx, -1) || '0', $2)
          AND (expires_at IS NULL OR expires_at > $3)) AS n
    FROM scopes s WHERE s.pfx IS NOT NULL
) counted WHERE n > 0 LIMIT $4`

// Projects counts the live keys of each project in the key range r that
// has any at now: at most limit projects, in key order, each with the
// count of its keys inside r.
func (s *Store) Projects(ctx context.Context, r KeyRange, limit int, now time.Time) ([]contract.ProjectInfo, error) {
	if limit <= 0 {
		return nil, contract.FieldErrorf(contract.EInvalid, "limit", "limit must be positive, got %d", limit)
	}
	if !ascii(r.Lo) || !ascii(r.Hi) || r.Lo >= r.Hi {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, projectsSQL, r.Lo, r.Hi, now, limit)
	if err != nil {
		return nil, translate("projects", err)
	}
	defer rows.Close()
	var out []contract.ProjectInfo
	for rows.Next() {
		var scope string
		var n int64
		if err := rows.Scan(&scope, &n); err != nil {
			return nil, translate("projects", err)
		}
		parts := strings.Split(scope, "/") // tenant, t, project, p, ""
		out = append(out, contract.ProjectInfo{Tenant: parts[1], Project: parts[3], Keys: n})
	}
	if err := rows.Err(); err != nil {
		return nil, translate("projects", err)
	}
	return out, nil
}

// keysUnderSQL and dueUnderSQL list the keys under a prefix a prefix
// write decides on (KeysUnder): the live keys a read sees, or the live
// keys past their expiry. Parameters: $1 prefix, $2 cursor, $3 end of
// the prefix range, $4 now, $5 limit.
const (
	keysUnderSQL = `SELECT key FROM kv_entries
    WHERE live AND key >= $1 AND key > $2 AND key < $3 AND (expires_at IS NULL OR expires_at > $4)
    ORDER BY key LIMIT $5`
	dueUnderSQL = `SELECT key FROM kv_entries
    WHERE live AND key >= $1 AND key > $2 AND key < $3 AND expires_at IS NOT NULL AND expires_at <= $4
    ORDER BY key LIMIT $5`
)

// KeysUnder lists, in key order, at most limit keys under prefix after
// the cursor after: those a read sees at now, or with due those past
// their expiry at now (which a read no longer sees and the sweeper has
// not yet expired). The writer reads them for a range delete or an
// expireDue, with their states (Find) and its overlay's unprojected
// writes.
func (s *Store) KeysUnder(ctx context.Context, prefix, after string, limit int, due bool, now time.Time) ([]string, error) {
	if !ascii(prefix) || !ascii(after) || limit <= 0 {
		return nil, nil
	}
	end, ok := prefixEnd(prefix)
	if !ok {
		end = "\x7f"
	}
	q := keysUnderSQL
	if due {
		q = dueUnderSQL
	}
	rows, err := s.pool.Query(ctx, q, prefix, after, end, now, limit)
	if err != nil {
		return nil, translate("keys under", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, translate("keys under", err)
	}
	return keys, nil
}
