package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/contract"
)

// Queues (schemas/postgres/00008_kv_elements_queue.sql,
// docs/collections.md "Queues"). An item is a kv_elements row whose
// member is QueueMember and whose state columns are those its
// latest event carried (contract.Element): the projector upserts it to
// exactly that state, or deletes it. Every read takes only the rows of
// the queue's incarnation (the member range of its since) in one range
// of the partial indexes: never a scan of the queue.

// upsertQueueItems writes queue items to the state their event carries:
// $1 collections, $2 members, $3 versions, $4 values, $5 states, $6
// deliveries, $7 visible_at, $8 dedup ids ("": none), $9 pushed_at, $10
// expires_at (the item's own TTL, 00009), $11 receipt nonces ("": none,
// 00014). The guards are upsertElements': newer than the queue's stored
// version and than the row's.
const upsertQueueItems = `
INSERT INTO kv_elements AS el (collection, member, version, value, state, deliveries, visible_at, dedup, pushed_at, expires_at,
    receipt_nonce)
SELECT c, m, v, x, s, d, va, nullif(dd, ''), pa, ea, nullif(rn, '')
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::int[], $7::timestamptz[], $8::text[], $9::timestamptz[],
    $10::timestamptz[], $11::text[]) AS t(c, m, v, x, s, d, va, dd, pa, ea, rn)
WHERE v > coalesce((SELECT version FROM kv_entries WHERE key = t.c), 0)
ON CONFLICT (collection, member) DO UPDATE SET version = excluded.version, value = excluded.value,
    state = excluded.state, deliveries = excluded.deliveries, visible_at = excluded.visible_at,
    dedup = excluded.dedup, pushed_at = excluded.pushed_at, expires_at = excluded.expires_at,
    receipt_nonce = excluded.receipt_nonce
WHERE el.version < excluded.version`

// queueItemColumns are a batch's queue item upserts, for unnest().
type queueItemColumns struct {
	collection, member, value, state, dedup, nonce []string
	version                                        []int64
	deliveries                                     []int32
	visibleAt, pushedAt, expiresAt                 []*time.Time
}

func (c *queueItemColumns) add(ref ElementRef, version int64, el *contract.Element) {
	c.collection = append(c.collection, ref.Collection)
	c.member = append(c.member, ref.Member)
	c.version = append(c.version, version)
	c.value = append(c.value, string(el.Value))
	c.state = append(c.state, el.State)
	c.deliveries = append(c.deliveries, int32(el.Deliveries))
	c.visibleAt = append(c.visibleAt, el.VisibleAt)
	c.dedup = append(c.dedup, el.DedupID)
	c.pushedAt = append(c.pushedAt, el.PushedAt)
	c.expiresAt = append(c.expiresAt, el.ExpiresAt)
	c.nonce = append(c.nonce, el.ReceiptNonce)
}

func (c *queueItemColumns) queue(b *pgx.Batch) {
	if len(c.member) > 0 {
		b.Queue(upsertQueueItems, c.collection, c.member, c.version, c.value, c.state, c.deliveries,
			c.visibleAt, c.dedup, c.pushedAt, c.expiresAt, c.nonce)
	}
}

// sinceSQL is the member prefix of a queue's incarnation: of $since when
// given (> 0), else of the live queue entry $key's since (NULL when the
// key is no live queue, so no member matches).
const sinceSQL = `lpad(to_hex(coalesce(nullif(%s::bigint, 0), (SELECT (value::jsonb->>'since')::bigint FROM kv_entries
    WHERE key = %s AND live AND semantics->>'purpose' = 'queue'))), 16, '0')`

// itemColumns are the columns of a queue item row, read by scanItem.
const itemColumns = `el.member, el.value, el.state, coalesce(el.deliveries, 0), el.visible_at, coalesce(el.dedup, ''), el.pushed_at, el.expires_at,
    coalesce(el.receipt_nonce, '')`

// headsSQL is the first ready items of a queue's incarnation in serving
// order, but the members the writer knows better ($3, its overlay's)
// and the items whose own TTL passed at $5 (NULL: none skipped): $1 the
// queue, $2 its since (0: the projection's), $4 how many. One range of
// kv_elements_queue_ready; the expired rows it passes over are those the
// sweeper has not removed yet (at most one sweep interval's).
var headsSQL = `SELECT ` + itemColumns + `
FROM (SELECT ` + fmt.Sprintf(sinceSQL, "$2", "$1") + ` AS p) s
CROSS JOIN LATERAL (SELECT * FROM kv_elements
    WHERE collection = $1 AND state = 'ready' AND member >= s.p || '.' AND member < s.p || '/'
        AND NOT (member = ANY($3::text[]))
        AND (expires_at IS NULL OR $5::timestamptz IS NULL OR expires_at > $5::timestamptz)
    ORDER BY member LIMIT $4) el`

// dedupSQL is the newest item of a queue's incarnation pushed with a
// dedupId: $1 the queue, $2 its since (0: the projection's), $3 the id.
// One probe of kv_elements_queue_dedup.
var dedupSQL = `SELECT ` + itemColumns + `
FROM (SELECT ` + fmt.Sprintf(sinceSQL, "$2", "$1") + ` AS p) s
CROSS JOIN LATERAL (SELECT * FROM kv_elements
    WHERE collection = $1 AND dedup = $3 AND member >= s.p || '.' AND member < s.p || '/'
    ORDER BY pushed_at DESC LIMIT 1) el`

// itemsSQL reads queue items by member: one primary-key probe each.
const itemsSQL = `SELECT t.c, ` + itemColumns + ` FROM unnest($1::text[], $2::text[]) AS t(c, m)
CROSS JOIN LATERAL (SELECT * FROM kv_elements WHERE collection = t.c AND member = t.m AND state IS NOT NULL OFFSET 0) el`

// scanItem reads one row of itemColumns (after extra) as the element
// state of the item.
func scanItem(row pgx.Row, extra ...any) (contract.Element, error) {
	var el contract.Element
	var value *string
	dest := append(extra, &el.Member, &value, &el.State, &el.Deliveries, &el.VisibleAt, &el.DedupID, &el.PushedAt, &el.ExpiresAt,
		&el.ReceiptNonce)
	if err := row.Scan(dest...); err != nil {
		return el, err
	}
	el.Op = contract.ElementAdd
	// In UTC, as the writer decides and the events carry them.
	for _, t := range []*time.Time{el.VisibleAt, el.PushedAt, el.ExpiresAt} {
		if t != nil {
			*t = t.UTC()
		}
	}
	if value != nil {
		el.Value = json.RawMessage(*value)
	}
	return el, nil
}

// HeadRef asks for the first ready items of a queue.
type HeadRef struct {
	Queue string
	// Since is the queue's since when the writer knows it; 0: the
	// projection's (the overlay does not hold the queue, so the
	// projection holds all of its events).
	Since int64
	// Exclude are members the writer knows better (its overlay's).
	Exclude []string
	Limit   int
	// Now, when set, leaves out the items whose own TTL passed by then
	// (never served).
	Now time.Time
}

// nowOrNil is t for SQL, NULL when zero.
func nowOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// DedupRef asks for the newest item of a queue pushed with DedupID.
type DedupRef struct {
	Queue   string
	Since   int64
	DedupID string
}

func readItems(rows pgx.Rows) ([]contract.Element, error) {
	defer rows.Close()
	var out []contract.Element
	for rows.Next() {
		el, err := scanItem(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, el)
	}
	return out, rows.Err()
}

// queueQueries queues the queue reads of q into b.
func queueQueries(b *pgx.Batch, q Query) {
	for _, h := range q.Heads {
		b.Queue(headsSQL, h.Queue, h.Since, nonNil(h.Exclude), h.Limit, nowOrNil(h.Now))
	}
	for _, d := range q.Dedups {
		b.Queue(dedupSQL, d.Queue, d.Since, d.DedupID)
	}
	if len(q.Items) > 0 {
		cs, ms := make([]string, len(q.Items)), make([]string, len(q.Items))
		for i, e := range q.Items {
			cs[i], ms[i] = e.Collection, e.Member
		}
		b.Queue(itemsSQL, cs, ms)
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// readQueueQueries reads the answers of queueQueries into f.
func readQueueQueries(br pgx.BatchResults, q Query, f *Found) error {
	for _, h := range q.Heads {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if f.Heads[h.Queue], err = readItems(rows); err != nil {
			return err
		}
	}
	for _, d := range q.Dedups {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		items, err := readItems(rows)
		if err != nil {
			return err
		}
		if len(items) > 0 {
			f.Dedups[d] = items[0]
		}
	}
	if len(q.Items) == 0 {
		return nil
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		el, err := scanItem(rows, &c)
		if err != nil {
			return err
		}
		f.Items[ElementRef{Collection: c, Member: el.Member}] = el
	}
	return rows.Err()
}

// queueMetaSQL reads a live queue's metadata: $1 the key, $2 now.
const queueMetaSQL = `SELECT e.value FROM kv_entries e
WHERE e.key = $1 AND e.live AND (e.expires_at IS NULL OR e.expires_at > $2) AND e.semantics->>'purpose' = 'queue'`

// peekSQL is headsSQL for a reader, bounded in bytes: $1 the queue, $2
// its since, $3 how many, $4 now, $5 the byte budget. As on a listing's
// page (pageFits), an item's value is sent only when the running sum of
// the items up to it fits the budget; the first always fits.
var peekSQL = `SELECT el.fits, ` + strings.ReplaceAll(itemColumns, "el.value", "CASE WHEN el.fits THEN el.value END") + `
FROM (SELECT ` + fmt.Sprintf(sinceSQL, "$2", "$1") + ` AS p) s
CROSS JOIN LATERAL (SELECT *, row_number() OVER w = 1 OR sum(` + itemBytes + `) OVER w <= $5 AS fits
    FROM kv_elements
    WHERE collection = $1 AND state = 'ready' AND member >= s.p || '.' AND member < s.p || '/'
        AND (expires_at IS NULL OR expires_at > $4::timestamptz)
    WINDOW w AS (ORDER BY member)
    ORDER BY member LIMIT $3) el
ORDER BY el.member`

// itemBytes is about the size of a queue item in a peek's JSON: its
// member, its value and a fixed allowance for the other fields.
const itemBytes = `(octet_length(member) + coalesce(octet_length(value), 0) + 120)`

// Peek returns the next count ready items of the queue key in serving
// order, but those whose own TTL passed at now, and no more than fit in
// maxBytes (but always the first), reading its metadata and the rows in
// one snapshot: an absent or expired queue has none. truncated: the
// budget cut the page short of count items.
func (s *Store) Peek(ctx context.Context, key string, count, maxBytes int, now time.Time) (items []contract.Element, truncated bool, err error) {
	if err := checkPage(count, maxBytes); err != nil {
		return nil, false, err
	}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var raw []byte
		err := tx.QueryRow(ctx, queueMetaSQL, key, now).Scan(&raw)
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
		rows, err := tx.Query(ctx, peekSQL, key, meta.Since, count, now, maxBytes)
		if err != nil {
			return err
		}
		items, truncated, err = readPeek(rows)
		return err
	})
	if err != nil {
		return nil, false, translate("peek", err)
	}
	return items, truncated, nil
}

// readPeek reads peekSQL rows up to the first that does not fit the byte
// budget (cut), and closes rows.
func readPeek(rows pgx.Rows) (items []contract.Element, cut bool, err error) {
	defer rows.Close()
	for rows.Next() {
		var fits bool
		el, err := scanItem(rows, &fits)
		if err != nil {
			return nil, false, err
		}
		if !fits {
			cut = true
			break
		}
		items = append(items, el)
	}
	rows.Close()
	return items, cut, rows.Err()
}

// DueItem is an in-flight queue item past its visibility deadline.
type DueItem struct {
	Queue      string
	Member     string
	Deliveries int64
}

// dueItemsSQL lists the in-flight items of partition $1's live queues
// whose deadline is at or before $2, earliest first, at most $3: a range
// of kv_elements_queue_inflight. Items of an earlier incarnation of a
// queue are left out (the requeue would refuse them).
var dueItemsSQL = `SELECT el.collection, el.member, el.deliveries FROM kv_elements el
JOIN kv_entries e ON e.key = el.collection
WHERE el.state = 'inflight' AND el.visible_at <= $2 AND e.partition = $1 AND e.live
    AND e.semantics->>'purpose' = 'queue'
    AND el.member >= lpad(to_hex((e.value::jsonb->>'since')::bigint), 16, '0') || '.'
ORDER BY el.visible_at
LIMIT $3`

// DueItems returns up to limit in-flight items of partition p's queues
// past their deadline at now: the sweeper's requeue work list.
func (s *Store) DueItems(ctx context.Context, p int32, now time.Time, limit int) ([]DueItem, error) {
	rows, err := s.pool.Query(ctx, dueItemsSQL, p, now, limit)
	if err != nil {
		return nil, translate("due items", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DueItem, error) {
		var d DueItem
		err := r.Scan(&d.Queue, &d.Member, &d.Deliveries)
		return d, err
	})
	if err != nil {
		return nil, translate("due items", err)
	}
	return out, nil
}

// expiredItemsSQL lists the ready and in-flight items of partition $1's
// live queues whose own TTL passed at $2, earliest first, at most $3: a
// range of kv_elements_queue_expiry (00009). Items of an earlier
// incarnation of a queue are left out (the expire would refuse them).
var expiredItemsSQL = `SELECT el.collection, el.member, coalesce(el.deliveries, 0) FROM kv_elements el
JOIN kv_entries e ON e.key = el.collection
WHERE el.state IN ('ready', 'inflight') AND el.expires_at IS NOT NULL AND el.expires_at <= $2
    AND e.partition = $1 AND e.live AND e.semantics->>'purpose' = 'queue'
    AND el.member >= lpad(to_hex((e.value::jsonb->>'since')::bigint), 16, '0') || '.'
ORDER BY el.expires_at
LIMIT $3`

// ExpiredItems returns up to limit ready or in-flight items of partition
// p's queues whose own TTL passed at now: the sweeper's qexpire work
// list.
func (s *Store) ExpiredItems(ctx context.Context, p int32, now time.Time, limit int) ([]DueItem, error) {
	rows, err := s.pool.Query(ctx, expiredItemsSQL, p, now, limit)
	if err != nil {
		return nil, translate("expired items", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DueItem, error) {
		var d DueItem
		err := r.Scan(&d.Queue, &d.Member, &d.Deliveries)
		return d, err
	})
	if err != nil {
		return nil, translate("expired items", err)
	}
	return out, nil
}
