package projection

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
)

// HistoryVersionOf is the version e made.
func HistoryVersionOf(e *contract.Event) contract.HistoryVersion {
	v := contract.HistoryVersion{Version: e.Version, Kind: e.Kind, Op: e.Op, Principal: e.Principal,
		RequestID: e.RequestID, TS: e.TS, ExpiresAt: e.ExpiresAt, TxnID: e.TxnID, Element: PublicElement(e.Element)}
	if e.Live() {
		v.Value = e.After
	}
	return v
}

// PublicElement is el as answers (history, watch) show it to principals: without the receipt
// nonce, which only the consumer the pop answered may hold.
func PublicElement(el *contract.Element) *contract.Element {
	if el == nil || el.ReceiptNonce == "" {
		return el
	}
	c := *el
	c.ReceiptNonce = ""
	return &c
}

// historyEvent is a kv_history row's event as jsonb, whichever column
// holds it: event for the rows written as HistoryJSONB (every row written
// before migration 00011), the text of event_text for those written as
// HistoryText (parsed here, by the reader: writing it costs no parse).
const historyEvent = `coalesce(event, event_text::jsonb)`

// historySQL reads a page of a key's history: one range scan of
// kv_history's primary key (key, version), oldest first. Each event is
// read without its before (a version's answer is the value after it),
// as jsonb's text, whichever column holds it (historyEvent). Like a
// listing's page (listSQL), the page is bounded by its row count and by
// a byte budget decided in the statement: a running sum of each event's
// text length marks the rows that fit (the first always does), and only
// those send their event. Parameters: $1 key, $2 first version, $3 page
// size + 1, $4 byte budget.
const historySQL = `SELECT version, fits, CASE WHEN fits THEN ev END FROM (
    SELECT version, ev,
        row_number() OVER page_order = 1 OR sum(octet_length(ev)) OVER page_order <= $4 AS fits
    FROM (
        SELECT version, (` + historyEvent + ` - 'before')::text AS ev FROM kv_history
        WHERE key = $1 AND version >= $2
        ORDER BY version
        LIMIT $3
    ) h
    WINDOW page_order AS (ORDER BY version)
) page ORDER BY version`

// History returns the versions of key from version from on, oldest first:
// at most limit of them and no more than fit in maxBytes (but always the
// first), and next, the version the next page starts at (0 after the
// last). Values come back through jsonb, as HistoryJSONB rows store
// them: equal as JSON to what was written, with object members in
// jsonb's order, whichever column holds the event.
func (s *Store) History(ctx context.Context, key string, from int64, limit, maxBytes int) (versions []contract.HistoryVersion, next int64, err error) {
	if err := checkPage(limit, maxBytes); err != nil {
		return nil, 0, err
	}
	rows, err := s.pool.Query(ctx, historySQL, key, from, limit+1, maxBytes)
	if err != nil {
		return nil, 0, translate("history", err)
	}
	defer rows.Close()
	versions = make([]contract.HistoryVersion, 0, min(limit, 1024))
	for rows.Next() {
		var v int64
		var fits bool
		var text *string
		if err := rows.Scan(&v, &fits, &text); err != nil {
			return nil, 0, translate("history", err)
		}
		if len(versions) == limit || !fits || text == nil {
			next = v
			break
		}
		// jsonb's text has spaces after ':' and ','; values are answered
		// compact, as everywhere else.
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(*text)); err != nil {
			return nil, 0, fmt.Errorf("projection: history of %s: %w", key, err)
		}
		e, err := codec.UnmarshalEvent(compact.Bytes())
		if err != nil {
			return nil, 0, fmt.Errorf("projection: history of %s: %w", key, err)
		}
		versions = append(versions, HistoryVersionOf(&e))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, translate("history", err)
	}
	return versions, next, nil
}

// Retention is how much of each key's history kv_history keeps (the
// projector's ESKV_HISTORY_RETENTION): versions older than MaxAge (by
// their event's ts) and versions beyond the newest MaxVersions are
// removed, whichever applies first. Zero fields keep everything. The
// key's newest version is always kept, so a key that was written is told
// from one never written (404), and its latest requestId stays known.
type Retention struct {
	MaxAge      time.Duration
	MaxVersions int64
}

// Enabled reports whether the retention removes anything.
func (r Retention) Enabled() bool { return r.MaxAge > 0 || r.MaxVersions > 0 }

// pruneSQL removes, for the keys of kv_entries after $1 (the next $2 of
// them in key order), their history rows the retention no longer keeps,
// at most $5 rows: versions at or below the key's version minus $3, and
// versions whose ts is before $4, never the key's own version (kv_entries
// holds the version of the key's newest projected event, whose
// kv_history row is written in the same transaction). Each key's rows
// are one range of kv_history's primary key: below the key's version
// when an age applies ($6), which must read each older row's ts; else
// only the versions the count removes. The per-key LIMIT keeps the
// lateral subquery a parameterized index scan per key (a plain join is
// planned as a hash join over the whole of kv_history). It answers how
// many rows it removed, the last key it looked at and how many keys.
const pruneSQL = `WITH ks AS (
    SELECT key, version FROM kv_entries WHERE key > $1 ORDER BY key LIMIT $2
), doomed AS (
    SELECT d.key, d.version FROM ks CROSS JOIN LATERAL (
        SELECT h.key, h.version FROM kv_history h
        WHERE h.key = ks.key AND h.version < CASE WHEN $6 THEN ks.version ELSE ks.version - $3 + 1 END
            AND (h.version <= ks.version - $3 OR h.ts < $4)
        LIMIT $5
    ) d
    LIMIT $5
), gone AS (
    DELETE FROM kv_history h USING doomed d WHERE h.key = d.key AND h.version = d.version RETURNING 1
)
SELECT (SELECT count(*) FROM gone), coalesce((SELECT max(key) FROM ks), ''), (SELECT count(*) FROM ks)`

// PruneBatch bounds one statement of PruneHistory: the keys it looks at
// and the rows it removes.
type PruneBatch struct {
	Keys int
	Rows int
}

// PruneHistory removes the kv_history rows r no longer keeps at now, in
// statements of at most b.Keys keys and b.Rows rows each (each its own
// transaction, so the projector's batches never wait long on it), and
// returns how many it removed. A retention that keeps everything removes
// nothing.
func (s *Store) PruneHistory(ctx context.Context, r Retention, now time.Time, b PruneBatch) (int64, error) {
	if !r.Enabled() {
		return 0, nil
	}
	keep := int64(math.MaxInt64) // no version bound: version - MaxInt64 is below every version
	if r.MaxVersions > 0 {
		keep = r.MaxVersions
	}
	var before time.Time // no age bound: no ts is before year 1
	if r.MaxAge > 0 {
		before = now.Add(-r.MaxAge)
	}
	var total int64
	after := ""
	for {
		var deleted, keys int64
		var last string
		err := s.pool.QueryRow(ctx, pruneSQL, after, b.Keys, keep, before, b.Rows, r.MaxAge > 0).Scan(&deleted, &last, &keys)
		if err != nil {
			return total, translate("prune history", err)
		}
		total += deleted
		switch {
		case deleted == int64(b.Rows):
			// The row bound cut the statement short: the same keys again.
		case keys < int64(b.Keys):
			return total, nil
		default:
			after = last
		}
	}
}
