package projection

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eskv/eskv/contract"
)

// Load is Apply for a rebuild into an empty projection (after
// DeferIndexes): it writes the same rows, and most of them by COPY
// instead of INSERT .. ON CONFLICT, which reads the primary key before
// each row it writes and takes its columns through arrays (unnest) that
// Go encodes and Postgres decodes once more. The batch is cut into runs
// in its order: events of collections (kv_elements) and of field-index
// declarations (kv_field_indexes), rare, are applied by Apply, the
// others are copied (copyRun). A run that meets a row already there (a
// key or an event the topic holds more than once: the uncompacted head
// of a compacted topic) fails on the primary key, is rolled back and
// applied by Apply, which keeps each key's newest version and each event
// once; so what Load writes is what Apply writes. Without DeferIndexes
// (a projection that was not empty) Load is Apply.
func (s *Store) Load(ctx context.Context, topic string, batch []Applied) error {
	if !s.deferFields {
		return s.Apply(ctx, topic, batch)
	}
	for len(batch) > 0 {
		special := applyOnly(&batch[0])
		n := 1
		for n < len(batch) && applyOnly(&batch[n]) == special {
			n++
		}
		run := batch[:n]
		batch = batch[n:]
		if !special {
			copied, err := s.copyRun(ctx, topic, run)
			if err != nil {
				return err
			}
			if copied {
				continue
			}
		}
		if err := s.Apply(ctx, topic, run); err != nil {
			return err
		}
	}
	return nil
}

// applyOnly reports whether Load leaves a's event to Apply: a
// collection's element change, or a field-index declaration.
func applyOnly(a *Applied) bool {
	return !a.Marker && (a.Event.Element != nil || contract.IsFieldIndexesKey(a.Event.Key))
}

// copyRun writes a run of events without element changes or
// declarations (and markers) in one transaction: each key's latest event
// into kv_entries and every event into kv_history by COPY, the
// partitions' next offsets as Apply moves them. It returns false, having
// written nothing, when a row was already there (the caller applies the
// run instead) or when a value is one copyRun does not write the way
// Apply does (a time outside years 1..9999).
func (s *Store) copyRun(ctx context.Context, topic string, run []Applied) (bool, error) {
	sc, _ := s.scratch.Get().(*applyScratch)
	if sc == nil {
		sc = new(applyScratch)
	}
	defer s.scratch.Put(sc)
	defer sc.release()
	sc.order(run)
	entries, history := &sc.copyEnt, &sc.copyHist
	entries.Reset()
	history.Reset()
	for _, i := range sc.latest {
		if err := sc.ent.add(&run[i], nil); err != nil {
			return false, err
		}
	}
	if !copyEntries(entries, &sc.ent) {
		return false, nil
	}
	for n, i := range sc.hist {
		if n > 0 {
			prev, e := &run[sc.hist[n-1]].Event, &run[i].Event
			if prev.Key == e.Key && prev.Version == e.Version {
				continue // a replay within the run: ON CONFLICT DO NOTHING
			}
		}
		if err := sc.h.add(&run[i]); err != nil {
			return false, err
		}
	}
	if !copyHistory(history, &sc.h, s.history) {
		return false, nil
	}
	parts, offs := sc.partitions(run)
	histSQL := `COPY kv_history (key, version, kind, op, ts, partition, kafka_offset, event_text, request_id) FROM STDIN`
	if s.history == HistoryJSONB {
		histSQL = `COPY kv_history (key, version, kind, op, ts, partition, kafka_offset, event) FROM STDIN`
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		pc := tx.Conn().PgConn()
		if entries.Len() > 0 {
			if _, err := pc.CopyFrom(ctx, entries, `COPY kv_entries (key, scope, partition, version, live, value, created_at, updated_at,
    expires_at, last_writer, request_id, request_digest, spec_ref, semantics, kafka_offset) FROM STDIN`); err != nil {
				return err
			}
		}
		if history.Len() > 0 {
			if _, err := pc.CopyFrom(ctx, history, histSQL); err != nil {
				return err
			}
		}
		if len(parts) > 0 {
			if _, err := tx.Exec(ctx, storeOffsets, topic, parts, offs); err != nil {
				return err
			}
		}
		return nil
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
		return false, nil
	}
	if err != nil {
		return false, translate("load", err)
	}
	return true, nil
}

// storeOffsets moves projector_offsets to a run's next offsets ($2
// partitions, $3 offsets) as writeEntries does, never backwards.
const storeOffsets = `
INSERT INTO projector_offsets AS po (topic, partition, next_offset, updated_at)
SELECT $1::text, p, o, now()
FROM unnest($2::int[], $3::bigint[]) AS t(p, o)
ON CONFLICT (topic, partition) DO UPDATE SET
    next_offset = GREATEST(po.next_offset, excluded.next_offset),
    updated_at = excluded.updated_at`

// copyEntries writes c's rows to w in COPY's text format, the columns of
// writeEntries' kv_entries insert; false when a time is not one
// copyTime writes.
func copyEntries(w *bytes.Buffer, c *entryColumns) bool {
	for i := range c.key {
		copyText(w, c.key[i], '\t')
		copyText(w, c.scope[i], '\t')
		w.WriteString(strconv.FormatInt(int64(c.partition[i]), 10))
		w.WriteByte('\t')
		w.WriteString(strconv.FormatInt(c.version[i], 10))
		w.WriteByte('\t')
		if c.live[i] {
			w.WriteString("t\t")
		} else {
			w.WriteString("f\t")
		}
		copyNullText(w, c.value[i], '\t')
		ok := copyNullTime(w, c.createdAt[i], '\t') && copyTime(w, c.updatedAt[i], '\t') && copyNullTime(w, c.expiresAt[i], '\t')
		if !ok {
			return false
		}
		copyText(w, c.lastWriter[i], '\t')
		copyText(w, c.requestID[i], '\t')
		copyText(w, c.requestDigest[i], '\t')
		copyText(w, c.specRef[i], '\t')
		copyText(w, c.semantics[i], '\t')
		w.WriteString(strconv.FormatInt(c.offset[i], 10))
		w.WriteByte('\n')
	}
	return true
}

// copyHistory writes c's rows to w in COPY's text format, the columns of
// writeEntries' kv_history insert in format.
func copyHistory(w *bytes.Buffer, c *historyColumns, format HistoryFormat) bool {
	for i := range c.key {
		copyText(w, c.key[i], '\t')
		w.WriteString(strconv.FormatInt(c.version[i], 10))
		w.WriteByte('\t')
		copyText(w, c.kind[i], '\t')
		copyText(w, c.op[i], '\t')
		if !copyTime(w, c.ts[i], '\t') {
			return false
		}
		w.WriteString(strconv.FormatInt(int64(c.partition[i]), 10))
		w.WriteByte('\t')
		w.WriteString(strconv.FormatInt(c.offset[i], 10))
		w.WriteByte('\t')
		if format == HistoryJSONB {
			copyText(w, c.event[i], '\n')
			continue
		}
		copyText(w, c.event[i], '\t')
		copyNullText(w, c.requestID[i], '\n')
	}
	return true
}

// copyText writes s as a column of COPY's text format (backslash,
// newline, carriage return and tab escaped), then end.
func copyText(w *bytes.Buffer, s string, end byte) {
	from := 0
	for i := 0; i < len(s); i++ {
		var esc string
		switch s[i] {
		case '\\':
			esc = `\\`
		case '\n':
			esc = `\n`
		case '\r':
			esc = `\r`
		case '\t':
			esc = `\t`
		default:
			continue
		}
		w.WriteString(s[from:i])
		w.WriteString(esc)
		from = i + 1
	}
	w.WriteString(s[from:])
	w.WriteByte(end)
}

// copyNullText is copyText of *s, or NULL (\N) for nil.
func copyNullText(w *bytes.Buffer, s *string, end byte) {
	if s == nil {
		w.WriteString(`\N`)
		w.WriteByte(end)
		return
	}
	copyText(w, *s, end)
}

// copyTimeLayout writes a time as timestamptz reads it: to the
// microsecond, which is what Postgres keeps and what pgx sends (it drops
// the nanoseconds below; so does formatting after Truncate).
const copyTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// copyTime writes t, then end; false, writing nothing, for a year outside
// 1..9999, which the layout does not write as Postgres reads it.
func copyTime(w *bytes.Buffer, t time.Time, end byte) bool {
	t = t.UTC()
	if y := t.Year(); y < 1 || y > 9999 {
		return false
	}
	var b [40]byte
	w.Write(t.Truncate(time.Microsecond).AppendFormat(b[:0], copyTimeLayout))
	w.WriteByte(end)
	return true
}

// copyNullTime is copyTime of *t, or NULL for nil.
func copyNullTime(w *bytes.Buffer, t *time.Time, end byte) bool {
	if t == nil {
		w.WriteString(`\N`)
		w.WriteByte(end)
		return true
	}
	return copyTime(w, *t, end)
}
