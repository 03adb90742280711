-- The kv_fields rows of a field its project no longer declares go, a
-- bounded step at a time, as a declared field's are built
-- (projection.Store.Backfill). They were left behind (never read: a
-- scan reads kv_fields only for a field declared and ready) until the
-- field was declared again, and, before migration 00019, until the key
-- was written again; so a project that declared and dropped fields in
-- turn over the same keys kept a row per key for each of them.
--
-- kv_field_drops holds a field still to clear: its scope, the partition
-- of the scope's declaration key (whose projector clears it), and the
-- last key cleared ('' before the first). A declaration that drops a
-- field adds its row; one that declares it again removes it (the
-- field's build then replaces its rows, leftovers included).

-- +goose Up
CREATE TABLE kv_field_drops (
    scope      text COLLATE "C" NOT NULL,
    field      text COLLATE "C" NOT NULL,
    partition  int NOT NULL,
    cleared_to text COLLATE "C" NOT NULL,
    PRIMARY KEY (scope, field)
);

-- The rows left behind so far: each (field, scope) kv_fields holds that
-- kv_field_indexes does not declare, found by skipping through the
-- primary key (field, key) one scope at a time (a probe per pair, not a
-- read of the table). Every such scope's declaration key has a row in
-- kv_entries (live, or the tombstone of its delete): its partition.
INSERT INTO kv_field_drops (scope, field, partition, cleared_to)
WITH RECURSIVE pairs (field, key) AS (
    (SELECT field, key FROM kv_fields ORDER BY field, key LIMIT 1)
    UNION ALL
    SELECT n.field, n.key FROM pairs p CROSS JOIN LATERAL (
        SELECT f.field, f.key FROM kv_fields f
        WHERE (f.field, f.key) > (p.field, kv_key_scope(p.key) || '0')
        ORDER BY f.field, f.key LIMIT 1
    ) n
)
SELECT kv_key_scope(p.key), p.field, e.partition, ''
FROM pairs p
JOIN kv_entries e ON e.key = kv_key_scope(p.key) || '/.eskv/field-indexes'
WHERE NOT EXISTS (SELECT FROM kv_field_indexes i WHERE i.scope = kv_key_scope(p.key) AND i.field = p.field);

-- +goose Down
DROP TABLE kv_field_drops;
