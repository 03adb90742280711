package projection

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// A page as of a position: the later pages of a listing answer as of the
// position of its first page (one snapshot, however many pages), while
// the projection has moved on. kv_entries holds each key's latest state
// and the offset of its latest event (kafka_offset); kv_history every
// retained version with its offset. A key's state at position at is its
// kv_entries row when that row's event is at or before at; otherwise the
// newest kv_history version at or before at — which is the state at at
// only if nothing of the key between it and the first version after at
// is missing: the version after at names its predecessor (prevVersion),
// and that must be the version found. A first version after at with no
// predecessor (0) means the key did not exist at at. Anything else is a
// gap the history's retention (PruneHistory) made: the page cannot be
// answered, contract.ESnapshotExpired.
//
// kv_entries keeps a row for every key ever written (deletes and expiries
// keep it, live false), so every key that existed at at has one: the
// candidates are all rows of the prefix's range, live or not, in key
// order, read in chunks until the page is full.

// pageAtChunk is how many candidate rows one statement of PageAt reads.
const pageAtChunk = 256

// pageAtSQL reads candidates of a page as of a position: each row's
// kv_entries state, whether it is the state at the position (current),
// and otherwise the newest history version at or before the position
// with its event, and the predecessor of the first version after it.
// hit is whether the state at the position matches the filter (the
// expression given). Parameters: $1 prefix, $2 cursor, $3 end of the
// prefix range, $4 chunk size, $5 position, then, with a filter, its $6
// field and $7 value.
func pageAtSQL(hit string) string {
	return `SELECT e.key, e.version, e.live, e.value, e.created_at, e.updated_at, e.expires_at,
    e.last_writer, e.request_id, e.request_digest, e.spec_ref, e.semantics,
    e.kafka_offset <= $5, h.version, h.ev, a.prev, ` + hit + `
FROM kv_entries e
LEFT JOIN LATERAL (
    SELECT version, coalesce(event_text, event::text) AS ev, ` + historyEvent + ` AS evj FROM kv_history
    WHERE key = e.key AND e.kafka_offset > $5 AND kafka_offset <= $5
    ORDER BY version DESC LIMIT 1
) h ON true
LEFT JOIN LATERAL (
    SELECT (` + historyEvent + ` ->> 'prevVersion')::bigint AS prev FROM kv_history
    WHERE key = e.key AND e.kafka_offset > $5 AND kafka_offset > $5
    ORDER BY version LIMIT 1
) a ON true
WHERE e.key >= $1 AND e.key > $2 AND e.key < $3
ORDER BY e.key
LIMIT $4`
}

// pageAtHit is pageAtSQL's hit for filter f: the same comparison as a
// scan's (scanSQL), on the fields kv_value_fields derives from the value
// at the position, which are those kv_fields holds of a live value.
func pageAtHit(f *Filter) (hit string, args []any, err error) {
	if f == nil {
		return "true", nil, nil
	}
	v, err := operandOf(f)
	if err != nil {
		return "", nil, err
	}
	match := "f.type = '" + v.typ + "' AND f.str " + opSQL[f.Op] + " $7::text"
	if v.typ == "n" {
		match = "f.type = 'n' AND f.num " + opSQL[f.Op] + " $7::numeric"
	}
	value := `CASE WHEN e.kafka_offset <= $5 THEN e.value::jsonb ELSE h.evj -> 'after' END`
	return `EXISTS (SELECT FROM kv_value_fields(` + value + `) f WHERE f.field = $6::text AND ` + match + `)`,
		[]any{f.Field, v.text}, nil
}

// PageAt is List (f nil) or Scan (f set) as of position at of the
// prefix's partition: the entries live at at, not expired at pg.Now, in
// key order after pg.After, at most pg.Limit and within pg.MaxBytes (but
// always the first; each entry counted as entryBytes counts it), and
// whether more follow. It is meant for a Store of Snapshot whose
// position is at or past at, so that every statement reads one snapshot.
// An entry answered from kv_history carries the event's value as the
// history stored it (the writer's text, or jsonb's for rows written as
// jsonb). A state at at that the history no longer holds is
// contract.ESnapshotExpired.
func (s *Store) PageAt(ctx context.Context, prefix string, f *Filter, at int64, pg Page) (entries []contract.Entry, truncated bool, err error) {
	if err := checkPage(pg.Limit, pg.MaxBytes); err != nil {
		return nil, false, err
	}
	if err := checkCursor(pg.After); err != nil {
		return nil, false, err
	}
	hit, fargs, err := pageAtHit(f)
	if err != nil || !ascii(prefix) {
		return nil, false, err
	}
	end, ok := prefixEnd(prefix)
	if !ok {
		end = "\x7f"
	}
	sql := pageAtSQL(hit)
	acc := pageAcc{limit: pg.Limit, maxBytes: pg.MaxBytes, entries: []contract.Entry{}}
	for after := pg.After; ; {
		rows, err := s.pool.Query(ctx, sql, append([]any{prefix, after, end, pageAtChunk, at}, fargs...)...)
		if err != nil {
			return nil, false, translate("list", err)
		}
		n, last, err := acc.read(rows, at, pg)
		if err != nil || acc.full || n < pageAtChunk {
			return acc.entries, acc.full, err
		}
		after = last
	}
}

// pageAcc gathers a page of PageAt: entries up to limit and the byte
// budget; full once a further entry was found (truncated).
type pageAcc struct {
	limit, maxBytes, used int
	entries               []contract.Entry
	full                  bool
}

// add adds e, or marks the page full when it does not fit.
func (a *pageAcc) add(e *contract.Entry) {
	size := entrySize(e)
	if len(a.entries) == a.limit || (len(a.entries) > 0 && a.used+size > a.maxBytes) {
		a.full = true
		return
	}
	a.used += size
	a.entries = append(a.entries, *e)
}

// entrySize is entryBytes of e, as a page's statement counts it (the
// semantics as their JSON rather than jsonb's size).
func entrySize(e *contract.Entry) int {
	sem, _ := json.Marshal(e.Semantics)
	return len(e.Key) + len(e.Value) + len(e.RequestID) + len(e.SpecRef) + len(sem) + 200
}

// read reads one chunk of pageAtSQL rows into a, up to the page being
// full, and closes rows: how many rows it read and the last key.
func (a *pageAcc) read(rows pgx.Rows, at int64, pg Page) (n int, last string, err error) {
	defer rows.Close()
	for rows.Next() && !a.full {
		var cur, hit bool
		var hv, prev *int64
		var ev *string
		st, err := scanStateCached(rows, nil, &cur, &hv, &ev, &prev, &hit)
		if err != nil {
			return n, last, translate("list", err)
		}
		n, last = n+1, st.Entry.Key
		if !cur {
			if st, err = stateAt(st.Entry.Key, at, hv, ev, prev); err != nil {
				return n, last, err
			}
		}
		if e := st.Visible(pg.Now); e != nil && hit {
			a.add(e)
		}
	}
	rows.Close()
	return n, last, translate("list", rows.Err())
}

// stateAt is the state of key at position at from its history (see
// PageAt): hv and ev the newest version at or before at and its event,
// prev the predecessor of the first version after at.
func stateAt(key string, at int64, hv *int64, ev *string, prev *int64) (keystate.State, error) {
	if prev != nil && *prev == 0 {
		return keystate.State{}, nil // created after at
	}
	if prev == nil || hv == nil || *hv != *prev || ev == nil {
		return keystate.State{}, &contract.Error{Code: contract.ESnapshotExpired,
			Message: fmt.Sprintf("the history no longer holds the state of %s at offset %d, where this listing's first page was read; list again from the first page", key, at)}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(*ev)); err != nil {
		return keystate.State{}, fmt.Errorf("projection: history of %s: %w", key, err)
	}
	e, err := codec.UnmarshalEvent(compact.Bytes())
	if err != nil {
		return keystate.State{}, fmt.Errorf("projection: history of %s: %w", key, err)
	}
	return keystate.FromEvent(&e), nil
}
