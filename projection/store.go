// Package projection is the Postgres projection of kv.changes: the fold of
// the changelog into kv_entries (current state per key), kv_history (every
// version), kv_fields (the top-level fields of live values, for filtered
// scans) and projector_offsets (where the projector resumes), applied one
// transaction per batch, with projector_topic naming the topic folded; the
// reads the writer and the API make of it; and, for rebuilds, projections
// in other schemas (InSchema, CreateSchema) and their comparison (Compare).
package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// Store reads and writes the projection tables through a pgx pool. It is
// safe for concurrent use (SetHistoryFormat aside: it comes first).
type Store struct {
	// pool is a pgx pool, or, in a Store that Snapshot hands to its read,
	// one transaction (snapshotDB).
	pool db
	// arrays: Apply passes its columns as pgarrays.go's arrays.
	arrays bool
	// history is the format Apply writes kv_history rows in.
	history HistoryFormat
	// deferFields: Apply leaves kv_fields alone; DeferredIndexes.Restore
	// derives it from kv_entries at the end of a rebuild (bulk.go).
	deferFields bool
	// scratch holds *applyScratch: an Apply's columns, reused by the
	// next (scratch.go).
	scratch sync.Pool
	// indexes is what Apply remembers of the declared field indexes
	// (fieldindexes.go).
	indexes fieldIndexCache
	// snapshots bounds the Snapshots in progress to half the pool's
	// connections, shared fairly among readers (nil in a Snapshot's own
	// view: snapshot.go).
	snapshots *snapshotGate
}

// New returns a Store on pool. The schema must be migrated (Migrate). Its
// Apply writes kv_history rows as HistoryText until SetHistoryFormat
// says otherwise.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, arrays: describes(pool), history: HistoryText,
		snapshots: newSnapshotGate(snapshotConns(pool.Config().MaxConns))}
}

// HistoryFormat is the format in which Apply writes a kv_history row's
// event (the projector's ESKV_HISTORY_FORMAT). Every reader of every
// release (0.1.0 on) reads rows of either format (historyEvent,
// requestsSQL); only development builds before migration 00011 read
// HistoryJSONB rows alone.
type HistoryFormat int

const (
	// HistoryJSONB writes the event parsed into jsonb (event), its
	// requestId found through kv_history_request_id's expression: the
	// rows the development builds before migration 00011 wrote and read.
	HistoryJSONB HistoryFormat = iota
	// HistoryText writes the event's text unparsed (event_text) and its
	// requestId in request_id (migration 00011), found through
	// kv_history_request (00012): 5-8 µs less Postgres CPU per projected
	// event (docs/performance.md, "kv_history's cost per event"): the
	// default. A development build before 00011 read event only (such
	// a row's History ended there and its requestId went unfound); every
	// release reads both formats.
	HistoryText
)

// String returns the format's name, as ParseHistoryFormat reads it.
func (f HistoryFormat) String() string {
	switch f {
	case HistoryJSONB:
		return "jsonb"
	case HistoryText:
		return "text"
	}
	return fmt.Sprintf("HistoryFormat(%d)", int(f))
}

// ParseHistoryFormat returns the format named s: jsonb or text.
func ParseHistoryFormat(s string) (HistoryFormat, error) {
	for _, f := range []HistoryFormat{HistoryJSONB, HistoryText} {
		if s == f.String() {
			return f, nil
		}
	}
	return 0, fmt.Errorf("kv_history format %q: want jsonb or text", s)
}

// SetHistoryFormat makes Apply write kv_history rows in format f. It is
// called before the Store is used.
func (s *Store) SetHistoryFormat(f HistoryFormat) { s.history = f }

// Applied is one event read from the changes topic, with its position.
type Applied struct {
	Partition int32
	Offset    int64
	Event     contract.Event
	// Marker is set for a transaction marker (a Kafka control record): it
	// carries no event and only moves the partition's stored offset past
	// itself, so a caught-up projection's offset equals the last stable
	// offset.
	Marker bool
	// Raw, when set, is the record value Event was read from, saying as
	// JSON what Event's encoding says (changelog.EventVerbatim): kv_history
	// stores it as the event instead of encoding Event again. Its readers
	// read the event as JSON (event_text::jsonb: History, the request
	// lookups, Compare), so what they read is the same either way.
	//
	// Apply reads Raw and Event.After in place, without copying them
	// (bytesText): the caller must not change either until Apply returns.
	Raw []byte
}

// writeEntries writes a batch's kv_entries, kv_history and
// projector_offsets rows in one statement (a statement costs its
// executor's start and end, about as much as a small batch's rows: a
// batch of figure 18a holds about five events), as three parts:
//
//   - ent: kv_entries takes each key's latest event ($1 .. $15, one row
//     per key, in key order) unless the stored version is already as
//     new, so replays write nothing;
//   - hist: kv_history gets every event it does not have yet ($16 ..
//     $24, in (key, version) order), here as HistoryText: the text of
//     the event (event_text, not parsed: migration 00011) and its
//     requestId (request_id, NULL when it carries none);
//     writeEntriesJSONB is the same statement writing HistoryJSONB;
//   - offs: projector_offsets moves to the batch's next offset per
//     partition ($25 topic, $26 partitions, $27 offsets), never
//     backwards.
//
// The main query reads ent, so the upsert runs first, to completion,
// taking the kv_entries row locks in key order before anything else is
// written: two projectors overlapping on a key after a rebalance wait
// there, as they did when the upsert was a statement of its own. The
// other two parts run after it (Postgres runs the data-modifying parts
// the main query does not read once it is done).
//
// It also turns enable_seqscan off for the rest of the transaction, for
// writeFields, which comes next and reads a batch's few keys: its
// generic plan is made once per connection, at its sixth run, and when
// that happens on small tables (a new projection, or figure 18a's 64 hot
// keys) the planner prefers sequential scans and hash joins, which then
// stay for the connection's life while the tables grow, or while their
// pages fill with the dead versions of hot rows (each update of a
// kv_fields row leaves one: its indexes hold the value). With it off,
// writeFields reads both tables through their indexes (and kv_fields
// again by ctid), the plan that is right for a batch of keys at any
// table size. The setting ends with the
// transaction (set_config, is_local): nothing else the connection runs
// is planned under it.
const writeEntries = writeEntriesEnt + `
    INSERT INTO kv_history (key, version, kind, op, ts, partition, kafka_offset, event_text, request_id)
    SELECT k, v, kd, op, ts, p, o, ev, rid
` + writeEntriesRest

// writeEntriesJSONB is writeEntries writing kv_history's rows as
// HistoryJSONB: the event parsed into event, no request_id ($24 is NULL),
// as the releases before migration 00011 wrote them (which is also why
// it works on a projection not migrated past 00010).
const writeEntriesJSONB = writeEntriesEnt + `
    INSERT INTO kv_history (key, version, kind, op, ts, partition, kafka_offset, event)
    SELECT k, v, kd, op, ts, p, o, ev::jsonb
` + writeEntriesRest

// writeEntriesEnt and writeEntriesRest are writeEntries around its
// kv_history insert's columns.
const writeEntriesEnt = `
WITH ent AS (
    INSERT INTO kv_entries AS e (key, scope, partition, version, live, value, created_at, updated_at,
        expires_at, last_writer, request_id, request_digest, spec_ref, semantics, kafka_offset)
    SELECT k, sc, p, v, l, val, ca, ua, ea, lw, rid, rd, sr, sem::jsonb, o
    FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::bool[], $6::text[],
        $7::timestamptz[], $8::timestamptz[], $9::timestamptz[], $10::text[], $11::text[],
        $12::text[], $13::text[], $14::text[], $15::bigint[])
        AS t(k, sc, p, v, l, val, ca, ua, ea, lw, rid, rd, sr, sem, o)
    ON CONFLICT (key) DO UPDATE SET
        scope = excluded.scope,
        partition = excluded.partition,
        version = excluded.version,
        live = excluded.live,
        value = excluded.value,
        created_at = excluded.created_at,
        updated_at = excluded.updated_at,
        expires_at = excluded.expires_at,
        last_writer = excluded.last_writer,
        request_id = excluded.request_id,
        request_digest = excluded.request_digest,
        spec_ref = excluded.spec_ref,
        semantics = excluded.semantics,
        kafka_offset = excluded.kafka_offset
    WHERE e.version < excluded.version
    RETURNING 1
), hist AS (`

const writeEntriesRest = `    FROM unnest($16::text[], $17::bigint[], $18::text[], $19::text[], $20::timestamptz[], $21::int[],
        $22::bigint[], $23::text[], $24::text[])
        AS t(k, v, kd, op, ts, p, o, ev, rid)
    ON CONFLICT (key, version) DO NOTHING
), offs AS (
    INSERT INTO projector_offsets AS po (topic, partition, next_offset, updated_at)
    SELECT $25::text, p, o, now()
    FROM unnest($26::int[], $27::bigint[]) AS t(p, o)
    ON CONFLICT (topic, partition) DO UPDATE SET
        next_offset = GREATEST(po.next_offset, excluded.next_offset),
        updated_at = excluded.updated_at
)
SELECT count(*), set_config('enable_seqscan', 'off', true)` + checkDeclarations + ` FROM ent`

// checkDeclarations is where writeEntries checks the declarations the
// batch's kv_fields rows were chosen by (fieldindexes.go): build
// replaces it with the call of kv_field_indexes_check ($28 .. $30), or
// with nothing on a projection without kv_field_indexes and in a rebuild
// (whose kv_fields is derived at its end).
const checkDeclarations = "/*check*/"

// checkCall is checkDeclarations' call.
const checkCall = `, kv_field_indexes_check($28::text[], $29::text[], $30::text[])`

// Both forms of writeEntries and writeEntriesJSONB, checked or not.
var (
	writeEntriesChecked      = strings.Replace(writeEntries, checkDeclarations, checkCall, 1)
	writeEntriesJSONBChecked = strings.Replace(writeEntriesJSONB, checkDeclarations, checkCall, 1)
)

// writeFields brings the kv_fields rows (the indexed fields of filtered
// scans) of every key of a batch whose kv_entries row now holds the
// batch's version (the upsert wrote it, or a replay found it already
// there: g) to the fields of that version's value (n, none when the key
// is not live), in one statement: it reads those keys' stored rows once
// (cur, through the primary key (field, key): $8 key and $9 field pair
// each key with every field its scope declares), pairs them with the new
// fields (d: a row to delete, to update or to insert, only where
// something differs), and deletes, updates and inserts them. A row that is already right is not written:
// rewriting it costs a heap tuple and an entry in each index, and leaves
// the old ones dead for every later probe to step over (figure 18a
// changes one field of two per write). A replay writes nothing. A key
// whose stored version is newer keeps its rows. The rows of fields the
// scope no longer declares are not read here: Backfill clears them
// (fieldindexes.go).
// Numbers compare as text, so 1.0 replaces 1 as a rebuild would store
// it.
//
// The fields come from Go (valueFields, fields.go) as arrays: $3 key, $4
// field, $5 type, $6 number literal (NULL unless type n), $7 string
// (NULL for type n). The numbers become numeric here, and those written
// out in more than 256 characters are left out, as kv_value_fields does.
// A batch with values valueFields does not decide is sent as
// writeFieldsFallback instead, whose $10 lists those keys: they get
// kv_value_fields of their stored value, so the rows are the same either
// way. Nearly every batch has none, and this statement leaves that
// branch out: a plan's nodes cost their start and end on every run,
// whether they return rows or not.
//
// The delete and the update find their rows by ctid, as cur read them
// (TID scans: no second and third probe of kv_fields' indexes per
// field), and the insert knows from cur that its rows are new. That is
// sound because nothing else can change these keys' kv_fields rows
// between this statement's snapshot and its writes: every writer of a
// key's rows is an Apply that has first locked the key's kv_entries row
// in writeEntries (the upsert locks every key of its batch: a new row by
// its insert, an existing one by ON CONFLICT DO UPDATE, which locks the
// row even when its WHERE leaves it unchanged) and holds the lock to its
// commit. This transaction holds the locks of all the keys in g, taken
// before this statement's snapshot. (A ctid would not follow a row that
// another transaction updated meanwhile: the update would skip it.)
//
// g and d are materialized (each is read more than once); n and cur are
// read once, by d, and left to the planner to join in place (storing
// them costs a tuple store each per run, a few percent of the statement).
//
// The parts that read kv_fields and kv_entries are driven by their
// indexes whatever their size, in the generic plan too (enable_seqscan
// is off, writeEntries): g probes kv_entries once per key (a lateral
// subquery that OFFSET 0 keeps from being flattened: as a join, the
// generic plan made on a small table merge-joins the whole primary key
// index, and keeps doing so as the table grows), and cur probes the
// primary key once per pair of a key in g, likewise (a join would let
// the planner hash all of kv_fields).
//
// This is a statement of its own, after writeEntries, for its snapshot:
// when the upsert waited for another projector's lock on a key (two
// overlap briefly after a rebalance), the kv_fields rows that one
// committed are visible here, so cur reads them as they are. The three
// writing parts touch disjoint rows (fields gone, fields changed, fields
// new), so the order in which Postgres runs them does not matter. The
// upsert has locked each written key's kv_entries row (in key order)
// before this runs, so a projector overlapping on a key waits there and
// never holds kv_fields rows another one needs: no new lock order.
const writeFields = `
WITH g AS MATERIALIZED (
    SELECT e.* FROM unnest($1::text[], $2::bigint[]) AS t(k, v) CROSS JOIN LATERAL (
        SELECT e.key, e.live, e.expires_at FROM kv_entries e WHERE e.key = t.k AND e.version = t.v OFFSET 0) e
), n AS (` + fieldsFromGo + `
` + writeFieldsRows

// writeFieldsFallback is writeFields for a batch with keys ($10) whose
// fields kv_value_fields derives from their stored value, of which it
// keeps the declared ones (the pairs $8, $9).
const writeFieldsFallback = `
WITH g AS MATERIALIZED (
    SELECT e.* FROM unnest($1::text[], $2::bigint[]) AS t(k, v) CROSS JOIN LATERAL (
        SELECT e.key, e.live, e.expires_at, CASE WHEN e.key = ANY($10::text[]) THEN e.value END AS value
        FROM kv_entries e WHERE e.key = t.k AND e.version = t.v OFFSET 0) e
), n AS (` + fieldsFromGo + `
    UNION ALL
    SELECT g.key, f.field, f.type, f.num, f.str, g.expires_at
    FROM g CROSS JOIN LATERAL kv_value_fields(g.value::jsonb) AS f
    JOIN unnest($8::text[], $9::text[]) AS a(k, field) ON a.k = g.key AND a.field = f.field
    WHERE g.live AND g.value IS NOT NULL
` + writeFieldsRows

// fieldsFromGo is n of writeFields: the fields valueFields found.
const fieldsFromGo = `
    SELECT g.key, f.field, f.type, f.num, f.str, g.expires_at
    FROM (
        SELECT k, field, type::"char" AS type, num::numeric AS num, str
        FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) AS f(k, field, type, num, str)
    ) f
    JOIN g ON g.key = f.k
    WHERE g.live AND (f.num IS NULL OR length(f.num::text) <= 256)`

// writeFieldsRows is the rest of writeFields, after g and n.
const writeFieldsRows = `), cur AS (
    SELECT f.*
    FROM unnest($8::text[], $9::text[]) AS p(k, field) JOIN g ON g.key = p.k CROSS JOIN LATERAL (
        SELECT f.ctid AS tid, f.key, f.field, f.type, f.num, f.str, f.expires_at
        FROM kv_fields f WHERE f.field = p.field AND f.key = p.k OFFSET 0) f
), d AS MATERIALIZED (
    SELECT c.tid, n.key, n.field, n.type, n.num, n.str, n.expires_at
    FROM cur c FULL JOIN n ON n.key = c.key AND n.field = c.field
    WHERE c.tid IS NULL OR n.key IS NULL
        OR (c.type, c.num::text, c.str, c.expires_at) IS DISTINCT FROM (n.type, n.num::text, n.str, n.expires_at)
), del AS (
    DELETE FROM kv_fields f
    WHERE f.ctid = ANY(ARRAY(SELECT tid FROM d WHERE d.key IS NULL))
), upd AS (
    UPDATE kv_fields f SET type = d.type, num = d.num, str = d.str, expires_at = d.expires_at
    FROM d
    WHERE f.ctid = d.tid AND d.key IS NOT NULL
)
INSERT INTO kv_fields (key, field, type, num, str, expires_at)
SELECT key, field, type, num, str, expires_at FROM d WHERE tid IS NULL`

// Apply folds a batch of events of topic into the projection in one
// transaction: kv_entries takes each key's latest event unless the stored
// version is already as new (so replays are no-ops), kv_history gets every
// event it does not have yet, and projector_offsets moves to the highest
// offset+1 per partition of the batch, never backwards. Put makes a key
// live with value = after; delete and expire keep the row and its version
// with live false and no value. kv_fields follows kv_entries for the
// fields the key's project declares (fieldindexes.go): a key's rows are
// those of its current live value's declared fields (none otherwise);
// a batch whose projects declare nothing writes no kv_fields row, and
// the events of a project's declaration key keep kv_field_indexes.
// kv_elements takes the element changes of collection events (sadd,
// srem), all of them in order (elements.go).
//
// Rows are written in key order, so two projectors that overlap briefly
// after a rebalance take row locks in the same order and cannot deadlock.
func (s *Store) Apply(ctx context.Context, topic string, batch []Applied) error {
	if len(batch) == 0 {
		return nil
	}
	sc, _ := s.scratch.Get().(*applyScratch)
	if sc == nil {
		sc = new(applyScratch)
	}
	defer s.scratch.Put(sc)
	defer sc.release()
	sc.arrays, sc.noFields = s.arrays, s.deferFields
	sc.scopes = batchScopes(batch, sc.scopes)
	// A declaration another projector applied since this one read it
	// (after a rebalance) fails the batch's check: read them again.
	for attempt := 0; ; attempt++ {
		d := declarations{}
		if !s.deferFields && len(sc.scopes) > 0 {
			var err error
			if d, err = s.declared(ctx, sc.scopes); err != nil {
				return err
			}
		}
		b, err := sc.build(topic, batch, s.history, &d)
		if err != nil {
			return err
		}
		// One round trip, one transaction: pgx pipelines the batch with
		// a single Sync, and Postgres runs the statements up to a Sync as
		// one implicit transaction (the first that fails rolls back them
		// all), so no BEGIN and COMMIT of their own, each a round trip
		// and a wakeup of both processes per batch.
		err = s.pool.SendBatch(ctx, b).Close()
		if len(sc.decl) > 0 || (err != nil && declarationsChanged(err)) {
			s.forget(sc.scopes)
		}
		if err != nil && declarationsChanged(err) && attempt < 3 {
			sc.release()
			continue
		}
		return translate("apply", err)
	}
}

// applyBatch returns the statements that fold batch (not empty) into the
// projection, in the order Apply sends them, kv_history's rows in format,
// as on a projection where nothing is declared.
func applyBatch(topic string, batch []Applied, format HistoryFormat) (*pgx.Batch, error) {
	return new(applyScratch).build(topic, batch, format, &declarations{absent: true})
}

// build returns applyBatch's statements, their columns in sc, the
// kv_fields rows those of the fields d and the batch declare.
func (sc *applyScratch) build(topic string, batch []Applied, format HistoryFormat, d *declarations) (*pgx.Batch, error) {
	sc.order(batch)
	sc.effectiveDeclarations(batch, d)
	ent, h := &sc.ent, &sc.h
	ent.reset(len(sc.latest))
	for _, i := range sc.latest {
		if err := ent.add(&batch[i], sc.declaredSet(batch[i].Event.Scope)); err != nil {
			return nil, err
		}
	}
	h.reset(len(sc.hist))
	for _, i := range sc.hist {
		if err := h.add(&batch[i]); err != nil {
			return nil, err
		}
	}
	parts, offs := sc.partitions(batch)

	checked := !d.absent && !sc.noFields && len(sc.scopes) > 0
	write, requestIDs := writeEntries, h.requestID
	if checked {
		write = writeEntriesChecked
	}
	if format == HistoryJSONB {
		write, requestIDs = writeEntriesJSONB, nil // $24 NULL: the request_id column is not written
		if checked {
			write = writeEntriesJSONBChecked
		}
	}
	b := sc.batch()
	queueElements(b, batch) // before the upsert: its guard reads the stored versions
	if sc.arrays {
		batchArrays(b, &sc.slab)
	}
	key, version := sc.text(ent.key), sc.int8(ent.version)
	args := []any{key, sc.text(ent.scope), ent.partition, version, ent.live, sc.nullText(ent.value),
		sc.nullTime(ent.createdAt), sc.time(ent.updatedAt), sc.nullTime(ent.expiresAt), sc.text(ent.lastWriter),
		sc.text(ent.requestID), sc.text(ent.requestDigest), sc.text(ent.specRef), sc.text(ent.semantics),
		sc.int8(ent.offset), sc.text(h.key), sc.int8(h.version), sc.text(h.kind), sc.text(h.op), sc.time(h.ts),
		h.partition, sc.int8(h.offset), sc.text(h.event), sc.nullText(requestIDs),
		topic, parts, sc.int8(offs)}
	if checked {
		args = append(args, sc.text(d.scopes), sc.text(d.wantScopes), sc.text(d.wantFields))
	}
	b.Queue(write, args...)
	if !d.absent {
		for _, a := range sc.decl {
			b.Queue(writeDeclaration, a.key, a.version, a.scope, a.fields, a.partition)
		}
	}
	sc.queueFields(b)
	return b, nil
}

// queueFields queues the statement that writes the kv_fields rows of the
// batch's keys whose scope declares fields: none when no key's does (a
// batch of transaction markers, a scope that declares nothing, kv_fields
// deferred).
func (sc *applyScratch) queueFields(b *pgx.Batch) {
	ent := &sc.ent
	if len(ent.fkey) == 0 || sc.noFields {
		return
	}
	key, version := sc.text(ent.fkey), sc.int8(ent.fversion)
	f := ent.fields.args()
	args := []any{key, version, sc.text(f.key), sc.text(f.field), sc.text(f.typ),
		sc.nullText(f.num), sc.nullText(f.str), sc.text(ent.pairKey), sc.text(ent.pairField)}
	if len(ent.fallback) == 0 {
		b.Queue(writeFields, args...)
		return
	}
	b.Queue(writeFieldsFallback, append(args, sc.text(ent.fallback))...)
}

// entryColumns are the kv_entries rows of a batch, column by column, for
// unnest().
type entryColumns struct {
	key, scope             []string
	partition              []int32
	version, offset        []int64
	live                   []bool
	value                  []*string
	createdAt, expiresAt   []*time.Time
	updatedAt              []time.Time
	lastWriter, requestID  []string
	requestDigest, specRef []string
	semantics              []string
	// fkey and fversion are the keys (and versions) whose scope
	// declares fields: writeFields brings their kv_fields rows up to
	// date; pairKey and pairField pair each of them with every field
	// its scope declares (the rows it may have). fields are their rows
	// (the declared fields' candidates), but those of the keys in
	// fallback, which kv_value_fields derives (writeFieldsFallback).
	fkey               []string
	fversion           []int64
	pairKey, pairField []string
	fields             fieldColumns
	fallback           []string
	// values backs value's pointers, sem encodes semantics (columns.go),
	// fieldBuf is valueFields' room.
	values   []string
	sem      semanticsMemo
	fieldBuf []valueField
}

// fieldColumns are the kv_fields candidates of a batch's rows (valueFields),
// for unnest().
type fieldColumns struct {
	key, field, typ []string
	num, str        []*string
	// vals backs num's and str's pointers, as entryColumns.values.
	vals []string
}

func (c *fieldColumns) add(key string, f *valueField) {
	c.key = append(c.key, key)
	c.field = append(c.field, f.name)
	c.typ = append(c.typ, string(rune(f.typ)))
	if f.typ == 'n' {
		c.vals = append(c.vals, f.num)
		c.num = append(c.num, &c.vals[len(c.vals)-1])
		c.str = append(c.str, nil)
	} else {
		c.vals = append(c.vals, f.str)
		c.num = append(c.num, nil)
		c.str = append(c.str, &c.vals[len(c.vals)-1])
	}
}

// reset empties c for a batch of n rows, keeping its room.
func (c *entryColumns) reset(n int) {
	c.key = reuse(c.key, n)
	c.scope = reuse(c.scope, n)
	c.partition = reuse(c.partition, n)
	c.version = reuse(c.version, n)
	c.offset = reuse(c.offset, n)
	c.live = reuse(c.live, n)
	c.value = reuse(c.value, n)
	c.createdAt = reuse(c.createdAt, n)
	c.expiresAt = reuse(c.expiresAt, n)
	c.updatedAt = reuse(c.updatedAt, n)
	c.lastWriter = reuse(c.lastWriter, n)
	c.requestID = reuse(c.requestID, n)
	c.requestDigest = reuse(c.requestDigest, n)
	c.specRef = reuse(c.specRef, n)
	c.semantics = reuse(c.semantics, n)
	c.values = reuse(c.values, n)
	c.fields.reset()
	c.fallback = reuse(c.fallback, 0)
	c.fkey = reuse(c.fkey, 0)
	c.fversion = reuse(c.fversion, 0)
	c.pairKey = reuse(c.pairKey, 0)
	c.pairField = reuse(c.pairField, 0)
}

func (c *entryColumns) add(a *Applied, declared []string) error {
	e := &a.Event
	sem, err := c.sem.encode(&e.Semantics)
	if err != nil {
		return fmt.Errorf("projection: apply %s@%d: encode semantics: %w", e.Key, e.Version, err)
	}
	var value *string
	var expires *time.Time
	if len(declared) > 0 {
		c.fkey, c.fversion = append(c.fkey, e.Key), append(c.fversion, e.Version)
		for _, f := range declared {
			c.pairKey, c.pairField = append(c.pairKey, e.Key), append(c.pairField, f)
		}
	}
	if e.Live() {
		if len(e.After) > 0 {
			value = c.valueOf(bytesText(e.After))
		} else {
			value = c.valueOf("null")
		}
		expires = e.ExpiresAt
		if len(e.After) > 0 && len(declared) > 0 { // "null" has no fields
			c.addFields(e.Key, *value, declared)
		}
	}
	var created *time.Time
	if !e.CreatedAt.IsZero() {
		created = &e.CreatedAt
	}
	c.key = append(c.key, e.Key)
	c.scope = append(c.scope, e.Scope)
	c.partition = append(c.partition, a.Partition)
	c.version = append(c.version, e.Version)
	c.offset = append(c.offset, a.Offset)
	c.live = append(c.live, e.Live())
	c.value = append(c.value, value)
	c.createdAt = append(c.createdAt, created)
	c.expiresAt = append(c.expiresAt, expires)
	c.updatedAt = append(c.updatedAt, e.TS)
	c.lastWriter = append(c.lastWriter, e.Principal)
	c.requestID = append(c.requestID, e.RequestID)
	c.requestDigest = append(c.requestDigest, e.RequestDigest)
	c.specRef = append(c.specRef, e.SpecRef)
	c.semantics = append(c.semantics, sem)
	return nil
}

// addFields adds the rows of key's declared fields of value.
func (c *entryColumns) addFields(key, value string, declared []string) {
	fields, ok := valueFields(value, c.fieldBuf)
	if !ok {
		c.fallback = append(c.fallback, key)
		return
	}
	c.fieldBuf = fields[:0]
	for i := range fields {
		if has(declared, fields[i].name) {
			c.fields.add(key, &fields[i])
		}
	}
}

// historyColumns are the kv_history rows of a batch, for unnest().
type historyColumns struct {
	key, kind, op, event []string
	// requestID points at each event's RequestID, nil when it has none.
	requestID       []*string
	version, offset []int64
	ts              []time.Time
	partition       []int32
}

// reset empties c for a batch of n rows, keeping its room.
func (c *historyColumns) reset(n int) {
	c.key = reuse(c.key, n)
	c.kind = reuse(c.kind, n)
	c.op = reuse(c.op, n)
	c.event = reuse(c.event, n)
	c.requestID = reuse(c.requestID, n)
	c.version = reuse(c.version, n)
	c.offset = reuse(c.offset, n)
	c.ts = reuse(c.ts, n)
	c.partition = reuse(c.partition, n)
}

func (c *historyColumns) add(a *Applied) error {
	e := &a.Event
	b := a.Raw
	if b == nil {
		var err error
		if b, err = codec.MarshalEvent(e); err != nil {
			return fmt.Errorf("projection: apply %s@%d: encode event: %w", e.Key, e.Version, err)
		}
	}
	c.key = append(c.key, e.Key)
	c.kind = append(c.kind, string(e.Kind))
	c.op = append(c.op, string(e.Op))
	c.event = append(c.event, bytesText(b))
	var rid *string
	if e.RequestID != "" {
		rid = &e.RequestID
	}
	c.requestID = append(c.requestID, rid)
	c.version = append(c.version, e.Version)
	c.offset = append(c.offset, a.Offset)
	c.ts = append(c.ts, e.TS)
	c.partition = append(c.partition, a.Partition)
	return nil
}

// Offsets returns the next offset to read per partition of topic, as
// stored by Apply. Partitions never applied are absent.
func (s *Store) Offsets(ctx context.Context, topic string) (map[int32]int64, error) {
	out, err := readOffsets(ctx, s.pool, "projector_offsets", topic)
	if err != nil {
		return nil, translate("offsets", err)
	}
	return out, nil
}

// Offset returns the next offset to read of one partition of topic, as
// stored by Apply (0 when never applied): the one-row read a listing
// polls while it waits for the projector (writer.AwaitProjected), cheaper
// than Offsets' read of every partition.
func (s *Store) Offset(ctx context.Context, topic string, partition int32) (int64, error) {
	var next int64
	err := s.pool.QueryRow(ctx, `SELECT next_offset FROM projector_offsets WHERE topic = $1 AND partition = $2`,
		topic, partition).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, translate("offset", err)
	}
	return next, nil
}

const stateColumns = `key, version, live, value, created_at, updated_at, expires_at,
    last_writer, request_id, request_digest, spec_ref, semantics`

// State returns what the projection knows of key: Version 0 and not Live
// when the key was never written; a deleted or expired key keeps its last
// version with Live false. An entry past its expiry but not yet expired by
// an event is still Live here: State.Visible decides what a read sees.
func (s *Store) State(ctx context.Context, key string) (keystate.State, error) {
	st, err := scanState(s.pool.QueryRow(ctx, `SELECT `+stateColumns+` FROM kv_entries WHERE key = $1`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return keystate.State{}, nil
	}
	if err != nil {
		return keystate.State{}, translate("state", err)
	}
	return st, nil
}

// States returns the states of many keys in one query. Every requested key
// is in the map; keys never written have the zero State.
func (s *Store) States(ctx context.Context, keys []string) (map[string]keystate.State, error) {
	out, _, err := s.StatesAndRequests(ctx, keys, nil)
	return out, err
}

// statesSQL reads the kv_entries rows of keys ($1). One primary-key
// lookup per key, whatever the planner estimates: with "key = ANY($1)"
// it picks a sequential scan for a few hundred keys (a sweeper batch),
// which on a large, busy table costs 100x more. OFFSET 0 keeps the
// lateral subquery from being flattened into a join.
const statesSQL = `SELECT e.* FROM unnest($1::text[]) AS k(key)
		CROSS JOIN LATERAL (SELECT ` + stateColumns + ` FROM kv_entries WHERE kv_entries.key = k.key OFFSET 0) e`

// readStates reads the rows of statesSQL into out and closes rows.
func readStates(rows pgx.Rows, out map[string]keystate.State) error {
	defer rows.Close()
	cache := make(semCache)
	for rows.Next() {
		st, err := scanStateCached(rows, cache)
		if err != nil {
			return err
		}
		out[st.Entry.Key] = st
	}
	return rows.Err()
}

// A page of a listing is bounded twice: by its entry count (limit) and by
// its bytes (maxBytes), so that one request for a thousand large values
// cannot pin hundreds of megabytes. The byte budget is decided in the
// statement: a running sum of each entry's size (entryBytes, read from
// the values' headers, without reading them) marks the entries that fit;
// the first always fits. Values are sent only for the entries that fit,
// so the rows after the budget cost their metadata only.

// entryBytes is about the size of an entry's JSON: key, value, requestId,
// specRef, semantics and a fixed allowance for the other fields.
const entryBytes = `(octet_length(key) + coalesce(octet_length(value), 0) + octet_length(request_id) +
    octet_length(spec_ref) + pg_column_size(semantics) + 200)`

// pageColumns are stateColumns of a page row, the value only when the
// entry fits the byte budget, and whether it does.
const pageColumns = `key, version, live, CASE WHEN fits THEN value END, created_at, updated_at, expires_at,
    last_writer, request_id, request_digest, spec_ref, semantics, fits`

// pageFits returns the select list that marks the rows of a page that
// fit the byte budget, parameter budget.
func pageFits(budget string) string {
	return `*, row_number() OVER page_order = 1 OR sum(` + entryBytes + `) OVER page_order <= ` + budget + ` AS fits`
}

// listSQL lists a page. Parameters: $1 prefix, $2 cursor, $3 now, $4 end
// of the prefix range, $5 page size + 1, $6 byte budget.
var listSQL = `SELECT ` + pageColumns + ` FROM (
    SELECT ` + pageFits("$6") + `
    FROM kv_entries
    WHERE live AND key >= $1 AND key > $2 AND key < $4 AND (expires_at IS NULL OR expires_at > $3)
    WINDOW page_order AS (ORDER BY key)
    ORDER BY key
    LIMIT $5
) page ORDER BY key`

// Page is one read of a listing: the entries after After (exclusive; ""
// for the first page), at most Limit of them and no more than fit in
// MaxBytes (but always the first), live at Now.
type Page struct {
	After    string
	Limit    int
	MaxBytes int
	Now      time.Time
}

// List returns the live entries whose key starts with prefix and sorts
// after the cursor pg.After (exclusive; "" for the first page), not
// expired at pg.Now, in byte order of their keys: at most pg.Limit of
// them, and no more than fit in pg.MaxBytes (entryBytes each) — but
// always the first. truncated
// reports that more entries follow the last one returned (use its key as
// the next cursor). Keys are ASCII: a prefix with other bytes matches
// nothing.
func (s *Store) List(ctx context.Context, prefix string, pg Page) (entries []contract.Entry, truncated bool, err error) {
	after, limit, maxBytes, now := pg.After, pg.Limit, pg.MaxBytes, pg.Now
	if err := checkPage(limit, maxBytes); err != nil {
		return nil, false, err
	}
	if err := checkCursor(after); err != nil {
		return nil, false, err
	}
	if !ascii(prefix) {
		return nil, false, nil
	}
	end, ok := prefixEnd(prefix)
	if !ok {
		end = "\x7f" // above every key: keys are printable ASCII
	}
	rows, err := s.pool.Query(ctx, listSQL, prefix, after, now, end, limit+1, maxBytes)
	if err != nil {
		return nil, false, translate("list", err)
	}
	return readPage(rows, limit, "list")
}

// checkPage checks the bounds of a page.
func checkPage(limit, maxBytes int) error {
	if limit <= 0 {
		return contract.FieldErrorf(contract.EInvalid, "limit", "limit must be positive, got %d", limit)
	}
	if maxBytes <= 0 {
		return contract.FieldErrorf(contract.EInvalid, "maxBytes", "the page's byte budget must be positive, got %d", maxBytes)
	}
	return nil
}

// readPage reads up to limit entries of pageColumns rows, up to the first
// that does not fit the byte budget, and closes rows; truncated says a
// further row was there (queries ask for limit+1).
func readPage(rows pgx.Rows, limit int, op string) (entries []contract.Entry, truncated bool, err error) {
	defer rows.Close()
	entries = make([]contract.Entry, 0, min(limit, 1024))
	cache := make(semCache)
	for rows.Next() {
		var fits bool
		st, err := scanStateCached(rows, cache, &fits)
		if err != nil {
			return nil, false, translate(op, err)
		}
		if len(entries) == limit || !fits {
			truncated = true
			break
		}
		entries = append(entries, st.Entry)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, translate(op, err)
	}
	return entries, truncated, nil
}

// scanState reads one row of stateColumns. A live row gives the full
// entry; a deleted or expired one gives what keystate.FromEvent gives for
// such an event: key, version, update time, writer and request id.
func scanState(row pgx.Row) (keystate.State, error) {
	return scanStateCached(row, nil)
}

// semCache remembers decoded semantics by their JSON within one query:
// rows of one listing mostly share them, and decoding is most of the
// client's cost of a list.
type semCache map[string]contract.Semantics

// scanStateCached is scanState with cache; extra are the destinations
// of columns after stateColumns.
func scanStateCached(row pgx.Row, cache semCache, extra ...any) (keystate.State, error) {
	var (
		st               keystate.State
		e                contract.Entry
		value            []byte
		created, expires *time.Time
		sem              []byte
	)
	dest := append([]any{&e.Key, &st.Version, &st.Live, &value, &created, &e.UpdatedAt, &expires,
		&e.LastWriter, &e.RequestID, &st.RequestDigest, &e.SpecRef, &sem}, extra...)
	if err := row.Scan(dest...); err != nil {
		return keystate.State{}, err
	}
	e.Version = st.Version
	e.UpdatedAt = e.UpdatedAt.UTC()
	if !st.Live {
		st.Entry = contract.Entry{Key: e.Key, Version: e.Version, UpdatedAt: e.UpdatedAt, LastWriter: e.LastWriter, RequestID: e.RequestID}
		return st, nil
	}
	e.Value = value
	if created != nil {
		e.CreatedAt = created.UTC()
	}
	if expires != nil {
		t := expires.UTC()
		e.ExpiresAt = &t
	}
	if c, ok := cache[string(sem)]; ok {
		e.Semantics = c
		e.Semantics.ConsumerHints = slices.Clone(c.ConsumerHints)
	} else {
		if err := json.Unmarshal(sem, &e.Semantics); err != nil {
			return keystate.State{}, fmt.Errorf("decode semantics of %s: %w", e.Key, err)
		}
		if cache != nil {
			c := e.Semantics
			c.ConsumerHints = slices.Clone(c.ConsumerHints)
			cache[string(sem)] = c
		}
	}
	st.Entry = e
	return st, nil
}

// prefixEnd returns the smallest ASCII string greater than every string
// that starts with prefix, or false when there is none (no upper bound).
func prefixEnd(prefix string) (string, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0x7f {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// ascii reports whether s is ASCII without NUL: every key is, and
// Postgres text cannot hold a NUL at all (the query would fail).
func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 || s[i] == 0 {
			return false
		}
	}
	return true
}

// checkCursor refuses a cursor no listing returned: one that is not ASCII
// without NUL, so not a key, and that Postgres might not even read.
func checkCursor(after string) error {
	if !ascii(after) {
		return contract.FieldErrorf(contract.EInvalid, "cursor", "cursor is not one a listing returned")
	}
	return nil
}
