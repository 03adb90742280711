package projection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
)

// Reads of the past (GET /v1/kv/{key}?at=, GET /v1/kv?prefix=&at=) fold
// kv_history, which holds every event of every key (migration 00015
// indexes it by (key, kafka_offset) and by (partition, ts, kafka_offset)).
//
// The state of a key at a position of its partition is its newest event
// at or before the position's offset: a key's events are all in one
// partition, in version order, so that event is the fold of every event
// of the key up to the position. What history retention left of a key is
// every version from its oldest kept one on (pruneSQL removes prefixes),
// so the newest kept event at or before the offset is the right one
// whenever there is one. When there is none, the key was absent at the
// position if its oldest kept event is its first (version 1: it was
// written after the position); otherwise the events that decide the
// answer were removed, and the read is cursor_expired. That check is
// exact: it answers 410 only when no kept row can say what the key held.

// AsOf is the point of a partition's log a read of the past is answered
// at: every event of Partition with an offset at or before Offset (-1:
// none). When Time is set (a read at a time), an entry whose expiry is
// at or before it is absent as well, as a read at that time saw it; a
// read at a position sees what the log's events made of the key and
// nothing else (an entry past its expiry is there until its expire
// event).
type AsOf struct {
	Partition int32
	Offset    int64
	Time      *time.Time
}

// historyText is a kv_history row's event as text: the writer's own
// bytes for rows written as HistoryText, else jsonb's text without the
// event's before (a value is the after).
const historyText = `CASE WHEN event IS NULL THEN event_text ELSE (event - 'before')::text END`

// presentAt is true for a history row h (its kind and event) that leaves
// the key present at AsOf's time ($t, NULL for a position): a put whose
// expiry, if any, is after $t. CASE keeps the expiry unread (and the
// event unparsed) for a position.
func presentAt(t string) string {
	return `h.kind = 'put' AND CASE WHEN ` + t + `::timestamptz IS NULL THEN true
        ELSE coalesce((` + historyEvent + `->>'expiresAt')::timestamptz > ` + t + `, true) END`
}

// offsetAtTimeSQL resolves a time to the offset of the latest event of the
// partition by event time at or before it (ties by offset): one descent
// of kv_history_partition_ts. Parameters: $1 partition, $2 time.
const offsetAtTimeSQL = `SELECT kafka_offset FROM kv_history WHERE partition = $1 AND ts <= $2
    ORDER BY ts DESC, kafka_offset DESC LIMIT 1`

// OffsetAtTime returns the offset a read at time t is answered at: that of
// the latest event of partition whose event time is at or before t, by
// event time and then offset (-1 when there is none). While event times
// grow with offsets (one writer's clock), that is every event stamped at
// or before t and none after; the events of a transaction share their
// time, so it takes all of them or none.
func (s *Store) OffsetAtTime(ctx context.Context, partition int32, t time.Time) (int64, error) {
	var off int64
	err := s.pool.QueryRow(ctx, offsetAtTimeSQL, partition, t).Scan(&off)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1, nil
	}
	if err != nil {
		return 0, translate("position at", err)
	}
	return off, nil
}

// entryAsOfSQL reads the key's newest event at or before an offset (NULL
// when none), whether it leaves the key present, and the key's oldest
// kept version. Parameters: $1 key, $2 offset, $3 time or NULL.
var entryAsOfSQL = `SELECT h.version, h.ev, coalesce(h.visible, false),
        (SELECT min(version) FROM kv_history WHERE key = $1)
    FROM (SELECT 1) one LEFT JOIN LATERAL (
        SELECT h.version, ` + historyText + ` AS ev, ` + presentAt("$3") + ` AS visible
        FROM kv_history h WHERE h.key = $1 AND h.kafka_offset <= $2
        ORDER BY h.kafka_offset DESC LIMIT 1
    ) h ON true`

// EntryAsOf returns key's entry at at, nil when the key was absent then
// (never written yet, deleted, expired), or cursor_expired (field at)
// when the history retention removed the events that would say. The
// caller makes sure the projection holds every event up to at.Offset.
func (s *Store) EntryAsOf(ctx context.Context, key string, at AsOf) (*contract.Entry, error) {
	var version, first *int64
	var ev *string
	var visible bool
	err := s.pool.QueryRow(ctx, entryAsOfSQL, key, at.Offset, at.Time).Scan(&version, &ev, &visible, &first)
	if err != nil {
		return nil, translate("state at", err)
	}
	if version == nil {
		return nil, checkRetained(key, first, at)
	}
	if !visible {
		return nil, nil
	}
	e, err := entryOfEvent(key, *ev)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// checkRetained is the answer for a key none of whose kept events is at
// or before at: absent when its oldest kept version is its first (or it
// has none), else cursor_expired.
func checkRetained(key string, first *int64, at AsOf) error {
	if first == nil || *first <= 1 {
		return nil
	}
	return contract.FieldErrorf(contract.ECursorExpired, "at",
		"the history of %s before version %d was removed by the history retention: p%d.o%d is older than what is kept",
		key, *first, at.Partition, at.Offset)
}

// entryOfEvent is the entry a kv_history row's event text makes of key.
// jsonb's text has spaces after ':' and ','; entries are answered
// compact, as everywhere else.
func entryOfEvent(key, text string) (contract.Entry, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(text)); err != nil {
		return contract.Entry{}, fmt.Errorf("projection: history of %s: %w", key, err)
	}
	e, err := codec.UnmarshalEvent(compact.Bytes())
	if err != nil {
		return contract.Entry{}, fmt.Errorf("projection: history of %s: %w", key, err)
	}
	return e.Entry(), nil
}

// pageAsOfSQL lists a page of the keys under a prefix as they were at an
// offset: kv_entries names every key ever written (its rows are never
// removed), in key order, from its primary key; each key's newest event
// at or before the offset is one descent of kv_history_key_offset. The
// rows kept are the keys present then and the keys the retention cut
// (no event at or before the offset, oldest kept version above 1), whose
// row makes the page cursor_expired. The byte budget is decided in the
// statement, as listSQL's: a running sum of the events' text lengths.
// Parameters: $1 prefix, $2 cursor, $3 end of the prefix range, $4
// offset, $5 time or NULL, $6 page size + 1, $7 byte budget.
var pageAsOfSQL = `SELECT key, version, first, fits, CASE WHEN fits THEN ev END FROM (
    SELECT k.key, h.version, f.first, h.ev,
        row_number() OVER page_order = 1 OR sum(octet_length(h.ev) + 200) OVER page_order <= $7 AS fits
    FROM (SELECT key FROM kv_entries WHERE key >= $1 AND key > $2 AND key < $3 ORDER BY key) k
    LEFT JOIN LATERAL (
        SELECT h.version, ` + historyText + ` AS ev, ` + presentAt("$5") + ` AS visible
        FROM kv_history h WHERE h.key = k.key AND h.kafka_offset <= $4
        ORDER BY h.kafka_offset DESC LIMIT 1
    ) h ON true
    LEFT JOIN LATERAL (
        SELECT min(f.version) AS first FROM kv_history f WHERE f.key = k.key AND h.version IS NULL
    ) f ON true
    WHERE h.visible OR f.first > 1
    WINDOW page_order AS (ORDER BY k.key)
    ORDER BY k.key
    LIMIT $6
) page ORDER BY key`

// PageAsOf returns a page of the entries whose key starts with prefix as
// they were at at, after the cursor pg.After, in byte order of their
// keys, bounded as List's pages are (pg.Now is not used: at says which
// expiries count). A key of the page whose history the retention cut
// before at (EntryAsOf) makes the page cursor_expired. The caller makes
// sure the projection holds every event up to at.Offset.
func (s *Store) PageAsOf(ctx context.Context, prefix string, at AsOf, pg Page) (entries []contract.Entry, truncated bool, err error) {
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
		end = "\x7f" // above every key: keys are printable ASCII
	}
	rows, err := s.pool.Query(ctx, pageAsOfSQL, prefix, pg.After, end, at.Offset, at.Time, pg.Limit+1, pg.MaxBytes)
	if err != nil {
		return nil, false, translate("page at", err)
	}
	return readPageAsOf(rows, pg.Limit, at)
}

// readPageAsOf reads the rows of pageAsOfSQL as readPage reads listSQL's, and
// closes rows.
func readPageAsOf(rows pgx.Rows, limit int, at AsOf) (entries []contract.Entry, truncated bool, err error) {
	defer rows.Close()
	entries = make([]contract.Entry, 0, min(limit, 1024))
	for rows.Next() {
		var key string
		var version, first *int64
		var fits bool
		var ev *string
		if err := rows.Scan(&key, &version, &first, &fits, &ev); err != nil {
			return nil, false, translate("page at", err)
		}
		if len(entries) == limit || !fits {
			truncated = true
			break
		}
		if version == nil {
			return nil, false, checkRetained(key, first, at)
		}
		e, err := entryOfEvent(key, *ev)
		if err != nil {
			return nil, false, err
		}
		entries = append(entries, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, translate("page at", err)
	}
	return entries, truncated, nil
}
