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
// at or before the position's offset (none: the key was not written
// yet): a key's events are all in one partition, in version order, so
// that event is the fold of every event of the key up to the position.
//
// The history retention (PruneHistory), and a projection rebuilt from the
// compacted topic, remove versions, so the newest kept event at or
// before the offset may not be that event. Versions grow by exactly one
// per event (decide's newEvent), so the check is exact: the answer is
// the kept event at or before the offset (version v, 0 when none) when
// the key's first kept event after the offset is version v+1, or when
// there is none (then the kept event is the key's newest: the retention
// never removes that), or when the kept event is at the offset itself (a
// watch cursor names an event: what was removed after it is later).
// Otherwise a version between the two was removed,
// and the read is cursor_expired: the store cannot tell what the key
// held, and says so rather than guess.
//
// These are the one way the store reads the past: a read at= (the API's
// reads of the past) and a later page of a listing (whose pages answer
// as of its first page's position, api/listpage.go) alike. The two only
// differ in what a removed version means to the caller (AsOf.Snapshot):
// cursor_expired on the field at (the point asked is before the
// retention), or snapshot_expired (list again from the first page).

// AsOf is the point of a partition's log a read of the past is answered
// at: every event of Partition with an offset at or before Offset (-1:
// none). When Time is set (a read at a time), an entry whose expiry is
// at or before it is absent as well, as a read at that time saw it; a
// read at a position sees what the log's events made of the key and
// nothing else (an entry past its expiry is there until its expire
// event). Snapshot says the read is a later page of a listing, whose
// removed versions are snapshot_expired rather than cursor_expired.
type AsOf struct {
	Partition int32
	Offset    int64
	Time      *time.Time
	Snapshot  bool
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

// nextKept is a lateral subquery: the version of the key's (k) first
// kept event after the offset (p), one descent of kv_history_key_offset.
func nextKept(k, p string) string {
	return `SELECT n.version FROM kv_history n WHERE n.key = ` + k + ` AND n.kafka_offset > ` + p + `
        ORDER BY n.kafka_offset LIMIT 1`
}

// entryAsOfSQL reads the key's newest kept event at or before an offset
// (NULL when none), whether it leaves the key present, and the version of
// its first kept event after the offset. Parameters: $1 key, $2 offset,
// $3 time or NULL.
var entryAsOfSQL = `SELECT h.version, h.kafka_offset, h.ev, coalesce(h.visible, false), n.version
    FROM (SELECT 1) one LEFT JOIN LATERAL (
        SELECT h.version, h.kafka_offset, ` + historyText + ` AS ev, ` + presentAt("$3") + ` AS visible
        FROM kv_history h WHERE h.key = $1 AND h.kafka_offset <= $2
        ORDER BY h.kafka_offset DESC LIMIT 1
    ) h ON true
    LEFT JOIN LATERAL (` + nextKept("$1", "$2") + `) n ON true`

// EntryAsOf returns key's entry at at, nil when the key was absent then
// (never written yet, deleted, expired), or cursor_expired (field at)
// when the history retention removed the events that would say. The
// caller makes sure the projection holds every event up to at.Offset.
func (s *Store) EntryAsOf(ctx context.Context, key string, at AsOf) (*contract.Entry, error) {
	var k kept
	var ev *string
	var visible bool
	err := s.pool.QueryRow(ctx, entryAsOfSQL, key, at.Offset, at.Time).Scan(&k.version, &k.offset, &ev, &visible, &k.next)
	if err != nil {
		return nil, translate("state at", err)
	}
	if err := k.check(key, at); err != nil || !visible {
		return nil, err
	}
	e, err := entryOfEvent(key, *ev)
	if err != nil {
		return nil, err
	}
	return &e, nil
}

// kept is what kv_history keeps of a key around a point: the version and
// offset of its newest kept event at or before the point (nil: none),
// and the version of its first kept event after (nil: none).
type kept struct {
	version, offset, next *int64
}

// check is nil when k says what key held at at (see the top of this
// file), else cursor_expired.
func (k kept) check(key string, at AsOf) error {
	var v int64
	if k.version != nil {
		v = *k.version
	}
	if k.next == nil || *k.next == v+1 || (k.offset != nil && *k.offset == at.Offset) {
		return nil
	}
	if at.Snapshot {
		return &contract.Error{Code: contract.ESnapshotExpired,
			Message: fmt.Sprintf("the history retention removed versions of %s before version %d: its state at p%d.o%d, where this listing's first page was read, is no longer known; list again from the first page",
				key, *k.next, at.Partition, at.Offset)}
	}
	return contract.FieldErrorf(contract.ECursorExpired, "at",
		"the history retention removed versions of %s before version %d: its state at p%d.o%d is no longer known",
		key, *k.next, at.Partition, at.Offset)
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
// removed), in key order, from its primary key; each key's newest kept
// event at or before the offset, and its first kept one after, are a
// descent of kv_history_key_offset each. The rows kept are the keys
// present then whose value then matches the filter (the expression hit,
// pageAsOfHit) and those whose kept versions around the offset are not
// consecutive (kept.check), whose row makes the page expired. The byte
// budget is decided in the statement, as listSQL's: a running sum of the
// events' text lengths. Parameters: $1 prefix, $2 cursor, $3 end of the
// prefix range, $4 offset, $5 time or NULL, $6 page size + 1, $7 byte
// budget, then, with a filter, its $8 field and $9 value.
func pageAsOfSQL(hit string) string {
	return `SELECT key, version, kafka_offset, next, fits, CASE WHEN fits THEN ev END FROM (
    SELECT k.key, h.version, h.kafka_offset, n.version AS next, h.ev,
        row_number() OVER page_order = 1 OR sum(octet_length(h.ev) + 200) OVER page_order <= $7 AS fits
    FROM (SELECT key FROM kv_entries WHERE key >= $1 AND key > $2 AND key < $3 ORDER BY key) k
    LEFT JOIN LATERAL (
        SELECT h.version, h.kafka_offset, ` + historyText + ` AS ev, ` + presentAt("$5") + ` AND ` + hit + ` AS visible
        FROM kv_history h WHERE h.key = k.key AND h.kafka_offset <= $4
        ORDER BY h.kafka_offset DESC LIMIT 1
    ) h ON true
    LEFT JOIN LATERAL (` + nextKept("k.key", "$4") + `) n ON true
    WHERE h.visible OR (n.version <> coalesce(h.version, 0) + 1 AND h.kafka_offset IS DISTINCT FROM $4)
    WINDOW page_order AS (ORDER BY k.key)
    ORDER BY k.key
    LIMIT $6
) page ORDER BY key`
}

// pageAsOfHit is pageAsOfSQL's hit for filter f: the same comparison as
// a scan's (scanSQL), on the fields kv_value_fields derives from the
// value the event left (its after), which are those kv_fields holds of
// a live value.
func pageAsOfHit(f *Filter) (hit string, args []any, err error) {
	if f == nil {
		return "true", nil, nil
	}
	v, err := operandOf(f)
	if err != nil {
		return "", nil, err
	}
	match := "f.type = '" + v.typ + "' AND f.str " + opSQL[f.Op] + " $9::text"
	if v.typ == "n" {
		match = "f.type = 'n' AND f.num " + opSQL[f.Op] + " $9::numeric"
	}
	return `EXISTS (SELECT FROM kv_value_fields(` + historyEvent + ` -> 'after') f WHERE f.field = $8::text AND ` + match + `)`,
		[]any{f.Field, v.text}, nil
}

// PageAsOf returns a page of the entries whose key starts with prefix as
// they were at at, after the cursor pg.After, in byte order of their
// keys, bounded as List's pages are (pg.Now is not used: at says which
// expiries count), keeping only those whose value matches f when it is
// set (as Scan). A key of the page whose state at at the kept history
// cannot say (kept.check) makes the page cursor_expired (snapshot_expired
// for at.Snapshot). The caller makes sure the projection holds every
// event up to at.Offset.
func (s *Store) PageAsOf(ctx context.Context, prefix string, f *Filter, at AsOf, pg Page) (entries []contract.Entry, truncated bool, err error) {
	if err := checkPage(pg.Limit, pg.MaxBytes); err != nil {
		return nil, false, err
	}
	if err := checkCursor(pg.After); err != nil {
		return nil, false, err
	}
	hit, fargs, err := pageAsOfHit(f)
	if err != nil || !ascii(prefix) {
		return nil, false, err
	}
	end, ok := prefixEnd(prefix)
	if !ok {
		end = "\x7f" // above every key: keys are printable ASCII
	}
	args := append([]any{prefix, pg.After, end, at.Offset, at.Time, pg.Limit + 1, pg.MaxBytes}, fargs...)
	rows, err := s.pool.Query(ctx, pageAsOfSQL(hit), args...)
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
		var k kept
		var fits bool
		var ev *string
		if err := rows.Scan(&key, &k.version, &k.offset, &k.next, &fits, &ev); err != nil {
			return nil, false, translate("page at", err)
		}
		if len(entries) == limit || !fits {
			truncated = true
			break
		}
		if err := k.check(key, at); err != nil {
			return nil, false, err
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
