package projection

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
)

// Diff is the comparison of the projections in two schemas: Schema (for
// example a rebuild) against Against (for example the live one).
//
// Current state (kv_entries) is what must be equal. Each projection
// holds the fold of a prefix of the log, up to its stored offsets; where
// one is further along in a partition than the other (a live projector
// kept applying), rows changed at or past the smaller of the two stored
// offsets are not compared but counted in NotCompared. History is
// information only: a rebuild from the compacted topic holds each key's
// latest event, the live projection every event it ever applied.
// kv_fields is not compared: each side derives it from its own kv_entries
// (kv_value_fields of the live values) in the transaction that writes
// them, so equal entries mean equal fields. The elements of a live set
// (its kv_elements rows from its since on, docs/collections.md) are
// compared as one more column of its key, "elements".
type Diff struct {
	Schema, Against string
	// Entries and AgainstEntries are the kv_entries rows of each side.
	Entries, AgainstEntries int64
	// Differing counts the compared keys that are on one side only or
	// differ in any column; Keys lists the first of them by key.
	Differing int64
	Keys      []KeyDiff
	// NotCompared counts keys changed, on either side, at or past the
	// smaller of the two stored offsets of their partition.
	NotCompared int64
	// History and AgainstHistory are the kv_history rows of each side;
	// HistoryMismatch counts Schema's history rows (below the common
	// offsets) that Against lacks or holds with another event.
	History, AgainstHistory int64
	HistoryMismatch         int64
	// Offsets and AgainstOffsets are the stored next offsets per
	// partition of each side.
	Offsets, AgainstOffsets map[int32]int64
	// TopicID and AgainstTopicID are the IDs of the topic each side was
	// folded from (projector_topic; empty when not recorded).
	TopicID, AgainstTopicID string
}

// Equal reports that every compared key is equal on both sides and that
// both were folded from the same topic (when both recorded it).
func (d *Diff) Equal() bool { return d.Differing == 0 && !d.TopicsDiffer() }

// TopicsDiffer reports that the two sides were folded from different
// topics of the same name (one was deleted and recreated).
func (d *Diff) TopicsDiffer() bool {
	return d.TopicID != "" && d.AgainstTopicID != "" && d.TopicID != d.AgainstTopicID
}

// KeyDiff is one key whose kv_entries rows differ.
type KeyDiff struct {
	Key string
	// InSchema and InAgainst say on which sides the key has a row.
	InSchema, InAgainst bool
	// Version and AgainstVersion are the key's versions (0: no row).
	Version, AgainstVersion int64
	// Columns names the columns that differ when both sides have a row.
	Columns []string
}

// diffColumns are the kv_entries columns compared: all of them.
var diffColumns = []string{
	"scope", "partition", "version", "live", "value", "created_at", "updated_at", "expires_at",
	"last_writer", "request_id", "request_digest", "spec_ref", "semantics", "kafka_offset",
}

// diffSQL builds the comparison's common table expressions for schemas a
// and b (sanitized identifiers); $1 is the topic.
func diffSQL(a, b string) string {
	var cols []string
	for _, c := range diffColumns {
		cols = append(cols, fmt.Sprintf("CASE WHEN a.%[1]s IS DISTINCT FROM b.%[1]s THEN '%[1]s' END", c))
	}
	cols = append(cols, "CASE WHEN ea.h IS DISTINCT FROM eb.h THEN 'elements' END")
	return `
WITH ea AS (` + elementsDigestSQL(a) + `), eb AS (` + elementsDigestSQL(b) + `), parts AS (
    SELECT partition FROM ` + a + `.projector_offsets WHERE topic = $1
    UNION
    SELECT partition FROM ` + b + `.projector_offsets WHERE topic = $1
), bound AS (
    SELECT ps.partition, least(coalesce(oa.next_offset, 0), coalesce(ob.next_offset, 0)) AS next_offset
    FROM parts ps
    LEFT JOIN ` + a + `.projector_offsets oa ON oa.topic = $1 AND oa.partition = ps.partition
    LEFT JOIN ` + b + `.projector_offsets ob ON ob.topic = $1 AND ob.partition = ps.partition
), j AS (
    SELECT coalesce(a.key, b.key) AS key,
        a.key IS NOT NULL AS in_a,
        b.key IS NOT NULL AS in_b,
        coalesce(a.version, 0) AS va,
        coalesce(b.version, 0) AS vb,
        (a.key IS NOT NULL AND a.kafka_offset >= coalesce(ba.next_offset, 0)) OR
            (b.key IS NOT NULL AND b.kafka_offset >= coalesce(bb.next_offset, 0)) AS newer,
        array_remove(ARRAY[
            ` + strings.Join(cols, ",\n            ") + `
        ], NULL) AS cols
    FROM ` + a + `.kv_entries a
    FULL OUTER JOIN ` + b + `.kv_entries b ON a.key = b.key
    LEFT JOIN ea ON ea.key = a.key
    LEFT JOIN eb ON eb.key = b.key
    LEFT JOIN bound ba ON ba.partition = a.partition
    LEFT JOIN bound bb ON bb.partition = b.partition
), d AS (
    SELECT *, NOT in_a OR NOT in_b OR cardinality(cols) > 0 AS differs FROM j
)`
}

// DiffSpec is what Compare compares: the projections of Topic in schemas
// Schema and Against, listing at most Limit differing keys.
type DiffSpec struct {
	Schema, Against, Topic string
	Limit                  int
}

// Compare diffs the projections of sp.Topic in schemas sp.Schema and
// sp.Against, in SQL on one snapshot, listing at most sp.Limit differing
// keys. pool may work in any schema. A side that has entries but no
// stored offsets of the topic is refused (a wrong topic would make every
// key "not compared").
func Compare(ctx context.Context, pool *pgxpool.Pool, sp DiffSpec) (*Diff, error) {
	schema, against, topic, limit := sp.Schema, sp.Against, sp.Topic, sp.Limit
	a, b := pgx.Identifier{schema}.Sanitize(), pgx.Identifier{against}.Sanitize()
	d := &Diff{Schema: schema, Against: against}
	cte := diffSQL(a, b)
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if d.Offsets, err = readOffsets(ctx, tx, a+".projector_offsets", topic); err != nil {
			return err
		}
		if d.AgainstOffsets, err = readOffsets(ctx, tx, b+".projector_offsets", topic); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT
    coalesce((SELECT topic_id FROM `+a+`.projector_topic WHERE topic = $1), ''),
    coalesce((SELECT topic_id FROM `+b+`.projector_topic WHERE topic = $1), '')`,
			topic).Scan(&d.TopicID, &d.AgainstTopicID); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, cte+`
SELECT count(*) FILTER (WHERE differs AND NOT newer),
    count(*) FILTER (WHERE newer),
    count(*) FILTER (WHERE in_a),
    count(*) FILTER (WHERE in_b)
FROM d`, topic).Scan(&d.Differing, &d.NotCompared, &d.Entries, &d.AgainstEntries); err != nil {
			return err
		}
		if limit > 0 && d.Differing > 0 {
			rows, err := tx.Query(ctx, cte+`
SELECT key, in_a, in_b, va, vb, cols FROM d WHERE differs AND NOT newer ORDER BY key LIMIT $2`, topic, limit)
			if err != nil {
				return err
			}
			var k KeyDiff
			if _, err := pgx.ForEachRow(rows, []any{&k.Key, &k.InSchema, &k.InAgainst, &k.Version, &k.AgainstVersion, &k.Columns}, func() error {
				if !k.InSchema || !k.InAgainst {
					k.Columns = nil
				}
				d.Keys = append(d.Keys, k)
				return nil
			}); err != nil {
				return err
			}
		}
		// Events compare as jsonb whichever column holds them on each
		// side (historyEvent): a projection may hold both formats
		// (HistoryFormat), a rebuild either one.
		return tx.QueryRow(ctx, cte+`
SELECT (SELECT count(*) FROM `+a+`.kv_history),
    (SELECT count(*) FROM `+b+`.kv_history),
    (SELECT count(*) FROM `+a+`.kv_history h
        LEFT JOIN `+b+`.kv_history g ON g.key = h.key AND g.version = h.version
        LEFT JOIN bound bd ON bd.partition = h.partition
        WHERE h.kafka_offset < coalesce(bd.next_offset, 0)
            AND (g.key IS NULL OR coalesce(g.event, g.event_text::jsonb) IS DISTINCT FROM coalesce(h.event, h.event_text::jsonb)))`,
			topic).Scan(&d.History, &d.AgainstHistory, &d.HistoryMismatch)
	})
	if err != nil {
		return nil, translate(fmt.Sprintf("diff %s against %s", schema, against), err)
	}
	for _, side := range []struct {
		schema  string
		entries int64
		offsets map[int32]int64
	}{{schema, d.Entries, d.Offsets}, {against, d.AgainstEntries, d.AgainstOffsets}} {
		if side.entries > 0 && len(side.offsets) == 0 {
			return nil, contract.Errorf(contract.EInvalid,
				"projection: diff: schema %q has %d entries but no stored offsets of topic %q (another topic?)",
				side.schema, side.entries, topic)
		}
	}
	return d, nil
}

// querier is what readOffsets needs of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// readOffsets reads the stored next offsets of topic from table, a
// projector_offsets table (a sanitized, possibly schema-qualified name).
func readOffsets(ctx context.Context, q querier, table, topic string) (map[int32]int64, error) {
	rows, err := q.Query(ctx, `SELECT partition, next_offset FROM `+table+` WHERE topic = $1`, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int64)
	var p int32
	var o int64
	_, err = pgx.ForEachRow(rows, []any{&p, &o}, func() error {
		out[p] = o
		return nil
	})
	return out, err
}
