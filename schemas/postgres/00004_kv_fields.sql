-- Filtered scans (projection.Store.Scan, GET /v1/kv?field=&op=&value=):
-- the scalar top-level fields of live object values, one row per key and
-- field, so that "prefix + field compared with a value + ORDER BY key
-- LIMIT n" is answered by btree indexes. GIN on jsonb only answers
-- containment, not ranges per field. Written by the projector in the
-- transaction that writes the entry (projection.Store.Apply); derived
-- from kv_entries alone (kv_value_fields of a live row's value, and its
-- expires_at), so a rebuild reproduces it and the diff of two projections
-- compares kv_entries only.

-- +goose Up

-- kv_value_fields returns the fields of a value that are indexed, and how:
-- only when the value is a JSON object; only fields whose value is a
-- string (type 's', str = the string), a number (type 'n', num), a boolean
-- (type 'b', str 'true' or 'false') or null (type 'z', str ''); only
-- field names and strings up to 256 bytes (UTF-8), and numbers up to 256
-- characters written out in full (num::text, without exponent: 1e300 is
-- not indexed); of those, at most 64 per value, the first by field name in
-- byte order. An entry whose field is not indexed matches no filter on
-- that field. The caps keep every index tuple far below the btree limit
-- (about 2.7 kB), so no value can stop the projector.
-- projection.MaxFieldNameBytes and its siblings repeat these numbers.
-- +goose StatementBegin
CREATE FUNCTION kv_value_fields(value jsonb)
RETURNS TABLE (field text, type "char", num numeric, str text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
SELECT f.name, f.kind, f.n, f.s
FROM (
    SELECT e.key AS name,
        CASE jsonb_typeof(e.value)
            WHEN 'number' THEN 'n' WHEN 'string' THEN 's' WHEN 'boolean' THEN 'b' WHEN 'null' THEN 'z'
        END::"char" AS kind,
        CASE WHEN jsonb_typeof(e.value) = 'number' THEN e.value::numeric END AS n,
        CASE jsonb_typeof(e.value)
            WHEN 'string' THEN e.value #>> '{}' WHEN 'boolean' THEN e.value::text WHEN 'null' THEN ''
        END AS s
    FROM jsonb_each(CASE WHEN jsonb_typeof($1) = 'object' THEN $1 ELSE '{}'::jsonb END) AS e
) f
WHERE f.kind IS NOT NULL
    AND octet_length(f.name) <= 256
    AND (f.s IS NULL OR octet_length(f.s) <= 256)
    AND (f.n IS NULL OR length(f.n::text) <= 256)
ORDER BY f.name COLLATE "C"
LIMIT 64
$$;
-- +goose StatementEnd

CREATE TABLE kv_fields (
    -- COLLATE "C" as in kv_entries: prefixes are byte ranges and results
    -- come in byte order of keys.
    key        text COLLATE "C" NOT NULL,
    field      text COLLATE "C" NOT NULL,
    type       "char" NOT NULL CHECK (type IN ('n', 's', 'b', 'z')),
    num        numeric CHECK ((type = 'n') = (num IS NOT NULL)),
    -- Strings compare bytewise (COLLATE "C"): UTF-8 byte order is code
    -- point order, and RFC 3339 timestamps in UTC with a fixed number of
    -- fractional digits compare as the instants they name.
    str        text COLLATE "C" CHECK ((type <> 'n') = (str IS NOT NULL)),
    -- The entry's expiry, so expired entries are skipped inside the index.
    expires_at timestamptz
);

-- Existing live entries, before the indexes (faster than maintaining them
-- row by row).
INSERT INTO kv_fields (key, field, type, num, str, expires_at)
SELECT e.key, f.field, f.type, f.num, f.str, e.expires_at
FROM kv_entries e
CROSS JOIN LATERAL kv_value_fields(e.value::jsonb) AS f
WHERE e.live;

-- The projector replaces a key's rows (delete by key, insert).
ALTER TABLE kv_fields ADD PRIMARY KEY (key, field);

-- A scan first reads up to ~10 x limit rows of the field in key order
-- (index only): when matches are dense it finds its page there.
CREATE INDEX kv_fields_field_key ON kv_fields (field, key) INCLUDE (type, num, str, expires_at);

-- When they are sparse it reads the matches by value, then sorts them by
-- key: eq is a range on (field, value) that comes out in key order; lt,
-- gt and the others are ranges on the value.
CREATE INDEX kv_fields_num ON kv_fields (field, num, key) INCLUDE (expires_at)
    WHERE num IS NOT NULL;
CREATE INDEX kv_fields_str ON kv_fields (field, type, str, key) INCLUDE (expires_at)
    WHERE str IS NOT NULL;

ANALYZE kv_fields;

-- +goose Down
DROP TABLE kv_fields;
DROP FUNCTION kv_value_fields(jsonb);
