package projection

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/elemkey"
)

// Elements of collections (schemas/postgres/00006_kv_elements.sql,
// docs/collections.md).

// ElementRef names one member of a collection.
type ElementRef struct {
	Collection string
	Member     string
}

// Element changes are applied before the batch's kv_entries upsert, and
// only when the event is newer than the collection's stored version
// (replays change nothing), under a lock per collection
// (lockCollections). Within a batch every change of a (collection,
// member) is folded to its newest: a set member's state after a batch is
// that of its last add or remove, so applying the last one applies them
// all, in order. The guard reads kv_entries before the upsert of the same
// batch, which is queued after these statements.

// lockCollections serializes, per collection ($1), the projectors that
// apply its element changes: two projectors overlapping after a
// rebalance may apply an older and a newer batch of one set at once, and
// without it the older one's guard could read the stored version before
// the newer one committed, then re-add a member the newer batch removed.
// Once the lock is held, each following statement (READ COMMITTED: a new
// snapshot each) sees what the other projector committed. Transaction-
// scoped advisory locks, taken in one global order (of the keys' hashes)
// before any row lock, so they cannot deadlock with each other or with
// the kv_entries upsert; a hash collision only serializes two sets.
const lockCollections = `
SELECT pg_advisory_xact_lock(h) FROM (
    SELECT DISTINCT hashtextextended(c, 0) AS h FROM unnest($1::text[]) AS t(c) ORDER BY 1 OFFSET 0
) locks`

// upsertElements adds members: $1 collections, $2 members, $3 versions,
// $4 values (a list element's; "" for a set member: NULL).
const upsertElements = `
INSERT INTO kv_elements AS el (collection, member, version, value)
SELECT c, m, v, nullif(x, '') FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS t(c, m, v, x)
WHERE v > coalesce((SELECT version FROM kv_entries WHERE key = t.c), 0)
ON CONFLICT (collection, member) DO UPDATE SET version = excluded.version, value = excluded.value
WHERE el.version < excluded.version`

// deleteElements removes members: $1 collections, $2 members, $3 versions.
const deleteElements = `
DELETE FROM kv_elements el
USING unnest($1::text[], $2::text[], $3::bigint[]) AS t(c, m, v)
WHERE el.collection = t.c AND el.member = t.m AND el.version < t.v
    AND t.v > coalesce((SELECT version FROM kv_entries WHERE key = t.c), 0)`

// elementColumns are a batch's element changes of one kind, for unnest().
type elementColumns struct {
	collection, member, value []string
	version                   []int64
}

func (c *elementColumns) add(ref ElementRef, version int64, value []byte) {
	c.collection = append(c.collection, ref.Collection)
	c.member = append(c.member, ref.Member)
	c.version = append(c.version, version)
	c.value = append(c.value, string(value))
}

// queueElements queues the element changes of batch into b: each
// (collection, member)'s newest, in (collection, member) order, so two
// overlapping projectors lock rows in the same order.
func queueElements(b *pgx.Batch, batch []Applied) {
	latest := make(map[ElementRef]*contract.Event)
	for i := range batch {
		e := &batch[i].Event
		if batch[i].Marker || e.Element == nil {
			continue
		}
		ref := ElementRef{e.Key, e.Element.Member}
		if prev, ok := latest[ref]; !ok || prev.Version < e.Version {
			latest[ref] = e
		}
	}
	if len(latest) == 0 {
		return
	}
	collections := make(map[string]bool)
	for ref := range latest {
		collections[ref.Collection] = true
	}
	b.Queue(lockCollections, slices.Collect(maps.Keys(collections)))
	var adds, removes elementColumns
	var items queueItemColumns
	for _, ref := range slices.SortedFunc(maps.Keys(latest), func(a, b ElementRef) int {
		return cmp.Or(cmp.Compare(a.Collection, b.Collection), cmp.Compare(a.Member, b.Member))
	}) {
		e := latest[ref]
		switch {
		case e.Op.IsQueueWrite() && e.Element.State != "":
			items.add(ref, e.Version, e.Element)
		case e.Element.Op == contract.ElementAdd && !e.Op.IsQueueWrite():
			adds.add(ref, e.Version, e.Element.Value)
		default:
			removes.add(ref, e.Version, nil)
		}
	}
	items.queue(b)
	if len(adds.member) > 0 {
		b.Queue(upsertElements, adds.collection, adds.member, adds.version, adds.value)
	}
	if len(removes.member) > 0 {
		b.Queue(deleteElements, removes.collection, removes.member, removes.version)
	}
}

// membersSQL reads the kv_elements rows of ($1, $2) pairs: one primary
// key probe each.
const membersSQL = `SELECT t.c, t.m, el.version, el.value FROM unnest($1::text[], $2::text[]) AS t(c, m)
CROSS JOIN LATERAL (SELECT version, value FROM kv_elements WHERE collection = t.c AND member = t.m OFFSET 0) el`

// readMembers reads the rows of membersSQL into out, and the values of
// list elements into values.
func readMembers(rows pgx.Rows, out map[ElementRef]int64, values map[ElementRef]json.RawMessage) error {
	defer rows.Close()
	for rows.Next() {
		var ref ElementRef
		var v int64
		var value *string
		if err := rows.Scan(&ref.Collection, &ref.Member, &v, &value); err != nil {
			return err
		}
		out[ref] = v
		if value != nil {
			values[ref] = json.RawMessage(*value)
		}
	}
	return rows.Err()
}

// Element returns the version of the kv_elements row of ref, 0 when there
// is none. Whether it is an element is decided against the collection's
// metadata (contract.CollectionMeta.Since).
func (s *Store) Element(ctx context.Context, ref ElementRef) (int64, error) {
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT version FROM kv_elements WHERE collection = $1 AND member = $2`,
		ref.Collection, ref.Member).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, translate("element", err)
	}
	return v, nil
}

// membersPageSQL is a page of a set's members after a cursor: $1 the
// set's key, $2 the cursor, $3 now, $4 the page size + 1. It reads the
// set's metadata and its rows in one statement (one snapshot): rows
// before the set's since are skipped, and an absent, expired or non-set
// entry has no members.
const membersPageSQL = `
SELECT el.member FROM kv_entries e
JOIN kv_elements el ON el.collection = e.key
WHERE e.key = $1 AND e.live AND (e.expires_at IS NULL OR e.expires_at > $3)
    AND e.semantics->>'purpose' = 'set'
    AND el.member > $2 AND el.version >= (e.value::jsonb->>'since')::bigint
ORDER BY el.member
LIMIT $4`

// Members returns up to limit members of the set key after cursor (""
// for the first page), in byte order, and the cursor of the next page
// ("" when this one is the last).
func (s *Store) Members(ctx context.Context, key, cursor string, limit int, now time.Time) ([]string, string, error) {
	rows, err := s.pool.Query(ctx, membersPageSQL, key, cursor, now, limit+1)
	if err != nil {
		return nil, "", translate("members", err)
	}
	members, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, "", translate("members", err)
	}
	next := ""
	if len(members) > limit {
		members = members[:limit]
		next = members[limit-1]
	}
	if members == nil {
		members = []string{}
	}
	return members, next, nil
}

// elementsDigestSQL is, for the projection in schema s (a sanitized
// identifier), one row per live set, list or queue: its key and a digest
// of its elements, their versions and (a list's, a queue's) values, and a
// queue item's state, deliveries and own expiry, for Compare. Rows before the
// collection's since are not elements, nor are a list's rows outside its
// positions head .. head+size-1 (left behind by trims and pops:
// ListPosition, in SQL), nor a queue's rows of an earlier
// incarnation (QueueRange, in SQL). A set's rows have no value nor
// state, so their digest is what it was before lists and queues.
func elementsDigestSQL(s string) string {
	const pos = `lpad((coalesce((e.value::jsonb->>'head')::numeric, 0) + %s + 9223372036854775808)::text, 20, '0')`
	const qp = `lpad(to_hex((e.value::jsonb->>'since')::bigint), 16, '0')`
	return `SELECT el.collection AS key,
        md5(string_agg(el.member || E'\x1f' || el.version || coalesce(E'\x1f' || el.value, '')
            || coalesce(E'\x1f' || el.state || E'\x1f' || coalesce(el.deliveries, 0), '')
            || coalesce(E'\x1f' || extract(epoch FROM el.expires_at)::text, ''), E'\x1e' ORDER BY el.member)) AS h
    FROM ` + s + `.kv_elements el JOIN ` + s + `.kv_entries e ON e.key = el.collection
    WHERE e.live AND e.semantics->>'purpose' IN ('set', 'list', 'queue') AND el.version >= (e.value::jsonb->>'since')::bigint
        AND (e.semantics->>'purpose' = 'set'
            OR e.semantics->>'purpose' = 'queue' AND el.member >= ` + qp + ` || '.' AND el.member < ` + qp + ` || '/'
            OR e.semantics->>'purpose' = 'list' AND el.member BETWEEN ` + fmt.Sprintf(pos, "0") + ` AND ` +
		fmt.Sprintf(pos, "(e.value::jsonb->>'size')::numeric - 1") + `)
    GROUP BY el.collection`
}

// ListElement returns the version (0: no row) and value of the
// kv_elements row of ref, a list position: one primary-key probe.
func (s *Store) ListElement(ctx context.Context, ref ElementRef) (int64, json.RawMessage, error) {
	var v int64
	var value *string
	err := s.pool.QueryRow(ctx, `SELECT version, value FROM kv_elements WHERE collection = $1 AND member = $2`,
		ref.Collection, ref.Member).Scan(&v, &value)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, translate("element", err)
	}
	if value == nil {
		return v, nil, nil
	}
	return v, json.RawMessage(*value), nil
}

// listMetaSQL reads a live list's metadata: $1 the key, $2 now.
const listMetaSQL = `SELECT e.value FROM kv_entries e
WHERE e.key = $1 AND e.live AND (e.expires_at IS NULL OR e.expires_at > $2) AND e.semantics->>'purpose' = 'list'`

// rangeBytes is about the size of a list value in a range's JSON: the
// value and its separator.
const rangeBytes = `(coalesce(octet_length(value), 0) + 8)`

// listRangeSQL is a range of a list's positions: $1 the key, $2 and $3
// the first and last positions (ListPosition), $4 the list's
// since, $5 the byte budget: one range scan of the primary key. As on a
// listing's page (pageFits), a row's value is sent only when the running
// sum of the values up to it fits the budget; the first always fits.
const listRangeSQL = `SELECT CASE WHEN fits THEN value END, fits FROM (
    SELECT member, value, row_number() OVER w = 1 OR sum(` + rangeBytes + `) OVER w <= $5 AS fits
    FROM kv_elements
    WHERE collection = $1 AND member BETWEEN $2 AND $3 AND version >= $4
    WINDOW w AS (ORDER BY member)
) r ORDER BY member`

// Range returns the values of the list key from index start to stop
// (inclusive, negative from the end, as Redis LRANGE), at most limit of
// them and no more than fit in maxBytes (but always the first), reading
// the metadata and the rows in one snapshot. truncated: more were in the
// range; the next page starts at start+len(values). An absent or expired
// list is empty; a key of another purpose is contract.EWrongType.
func (s *Store) Range(ctx context.Context, key string, start, stop int64, pg Page) (values []json.RawMessage, truncated bool, err error) {
	limit, maxBytes, now := pg.Limit, pg.MaxBytes, pg.Now
	if err := checkPage(limit, maxBytes); err != nil {
		return nil, false, err
	}
	values = []json.RawMessage{}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var raw []byte
		err := tx.QueryRow(ctx, listMetaSQL, key, now).Scan(&raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		meta, err := contract.ParseCollectionMeta(raw)
		if err != nil {
			return err
		}
		from, to, ok := elemkey.ListRange(start, stop, meta.Size)
		if !ok {
			return nil
		}
		if to-from+1 > int64(limit) {
			to, truncated = from+int64(limit)-1, true
		}
		rows, err := tx.Query(ctx, listRangeSQL, key, elemkey.ListPosition(meta.Head+from), elemkey.ListPosition(meta.Head+to), meta.Since, maxBytes)
		if err != nil {
			return err
		}
		var cut bool
		values, cut, err = readRange(rows)
		truncated = truncated || cut
		return err
	})
	if err != nil {
		return nil, false, translate("range", err)
	}
	return values, truncated, nil
}

// readRange reads listRangeSQL rows up to the first that does not fit
// the byte budget (cut), and closes rows.
func readRange(rows pgx.Rows) (values []json.RawMessage, cut bool, err error) {
	defer rows.Close()
	values = []json.RawMessage{}
	for rows.Next() {
		var v *string
		var fits bool
		if err := rows.Scan(&v, &fits); err != nil {
			return nil, false, err
		}
		if !fits {
			cut = true
			break
		}
		if v == nil {
			return nil, false, errors.New("a list element without a value")
		}
		values = append(values, json.RawMessage(*v))
	}
	rows.Close()
	return values, cut, rows.Err()
}
