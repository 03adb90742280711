-- Declared field indexes (docs/api.md, "Filtered scans"). kv_fields held
-- every scalar top-level field of every live object value, which cost the
-- projector four btree entries per field per write (39 % of its Postgres
-- CPU per event). Now a project declares the fields its scans compare, in
-- its reserved key tenant/<t>/project/<p>/.eskv/field-indexes, value
-- {"fields": [...]} (contract.ParseFieldIndexes), and kv_fields holds the
-- rows of declared fields only. A scan of a field that is not declared,
-- or not ready, reads the values instead, a bounded number of them per
-- page (projection/scan.go).
--
-- kv_field_indexes is the projector's reading of the declarations: one
-- row per declared (scope, field), written in the transaction that
-- applies the declaration's event (projection.Store.Apply). A new field
-- is building: backfill_after is the last key whose rows the projector
-- wrote ('' before the first), and the projector writes the rest of the
-- scope's keys in steps between its batches (projection.Store.Backfill);
-- NULL once every key is done: the field is ready, and scans read it
-- from kv_fields. partition is the declaration key's (its scope's), so the
-- partition's projector is the one that backfills it.

-- +goose Up

CREATE TABLE kv_field_indexes (
    scope          text COLLATE "C" NOT NULL,
    field          text COLLATE "C" NOT NULL,
    partition      int NOT NULL,
    backfill_after text COLLATE "C",
    PRIMARY KEY (scope, field)
);

-- kv_field_indexes_check raises 'EK001' unless the fields declared in
-- scopes are want_fields of want_scopes (both in (scope, field) order):
-- Apply decides which kv_fields rows to write from the declarations it
-- remembers, and checks them with this in the transaction that writes
-- the rows, so that a declaration another projector applied meanwhile
-- (after a rebalance) makes it read them again instead of writing rows
-- that miss a field.
-- +goose StatementBegin
CREATE FUNCTION kv_field_indexes_check(scopes text[], want_scopes text[], want_fields text[])
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    have_scopes text[];
    have_fields text[];
BEGIN
    SELECT coalesce(array_agg(i.scope ORDER BY i.scope, i.field), '{}'),
        coalesce(array_agg(i.field ORDER BY i.scope, i.field), '{}')
    INTO have_scopes, have_fields
    FROM kv_field_indexes i WHERE i.scope = ANY (scopes);
    IF have_scopes IS DISTINCT FROM want_scopes OR have_fields IS DISTINCT FROM want_fields THEN
        RAISE EXCEPTION 'kv_field_indexes changed under the projector' USING ERRCODE = 'EK001';
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- The declarations that exist already, as the projector reads them
-- (contract.ParseFieldIndexes: an object with "fields" alone, an array of
-- 0 to 16 distinct strings of 1 to 256 bytes; any other value declares
-- nothing). They are ready: the former projector indexed every field, so
-- their kv_fields rows are complete.
INSERT INTO kv_field_indexes (scope, field, partition, backfill_after)
SELECT d.scope, f.field, d.partition, NULL
FROM (
    SELECT e.scope, e.partition, e.value::jsonb AS v
    FROM kv_entries e
    WHERE e.live AND e.key LIKE 'tenant/%/.eskv/field-indexes' AND e.key = e.scope || '/.eskv/field-indexes'
) d
CROSS JOIN LATERAL jsonb_array_elements_text(d.v -> 'fields') AS f(field)
WHERE jsonb_typeof(d.v) = 'object'
    AND (SELECT array_agg(k) FROM jsonb_object_keys(d.v) AS k) = '{fields}'
    AND jsonb_typeof(d.v -> 'fields') = 'array'
    AND jsonb_array_length(d.v -> 'fields') <= 16
    AND NOT EXISTS (SELECT FROM jsonb_array_elements(d.v -> 'fields') AS x
        WHERE jsonb_typeof(x) <> 'string' OR octet_length(x #>> '{}') NOT BETWEEN 1 AND 256)
    AND (SELECT count(DISTINCT x) = count(*) FROM jsonb_array_elements_text(d.v -> 'fields') AS x);

-- The rows of fields no project declares go. On a large kv_fields a
-- DELETE of most rows would write every row's deletion and leave the
-- table and its four indexes full of dead tuples; so the rows to keep
-- (the declared fields', read through kv_fields_field_key, field first)
-- are set aside, the table is truncated (its files replaced, at once)
-- and they are put back. With nothing declared, the usual case on
-- upgrading, that is a TRUNCATE alone.
CREATE TEMPORARY TABLE kv_fields_kept ON COMMIT DROP AS
SELECT f.*
FROM kv_field_indexes i
JOIN kv_fields f ON f.field = i.field AND f.key > i.scope || '/' AND f.key < i.scope || '0';

TRUNCATE kv_fields;

INSERT INTO kv_fields SELECT * FROM kv_fields_kept ORDER BY key, field;

ANALYZE kv_fields, kv_field_indexes;

-- +goose Down
DROP FUNCTION kv_field_indexes_check(text[], text[], text[]);
DROP TABLE kv_field_indexes;
