-- The scoped indexes of migration 00016 lead with one integer, the hash
-- of the row's scope, type and field (kv_field_group), in place of the
-- field, the scope and the type as three columns. A scan by value
-- (projection/scan.go) reads one field of one type in one project, so it
-- seeks on that hash, then on the value, as it sought on the three.
--
-- Why: building the index sorts its rows, and the sort compared the
-- field and the scope of every pair first, nearly always equal, so
-- abbreviated keys never decided and each comparison read up to five
-- variable-width columns. One 8-byte integer decides most comparisons
-- alone. In a rebuild, kv_fields_str_scoped's build was the longest step
-- of the restore (figure 23f of docs/performance.md: 148.6 s of 231.2 at
-- 11 million keys); measured in psql on 3.6 million rows, 12.7–14.0 s
-- → 5.7–5.8 s, and kv_fields_num_scoped 6.1 → 3.8 s. The index is also
-- smaller: it no longer stores the scope.
--
-- A hash is not exact: two groups may share one. The index INCLUDEs the
-- field and the type, and the scan checks both, and its key range (under
-- the scope), after the seek; a shared hash costs rows read, never a
-- wrong row. The scope comes first in the hashed text and has exactly
-- three '/', the type is one character, so two different groups never
-- hash the same text.
--
-- Built CONCURRENTLY (no lock that stops the projector's writes of
-- kv_fields while a large table is indexed), hence outside a
-- transaction, as migrations 00016 and 00019: each new index is built
-- under a new name, then the old one dropped and the new one renamed.
-- An interrupted run is run again from the start, and each step is
-- rerunnable (an invalid index is dropped first). Until an old index is
-- dropped, scans may read either: both answer the same rows.

-- +goose NO TRANSACTION
-- +goose Up

-- kv_field_group returns the hash of a field's rows of one type in one
-- scope (tenant/<t>/project/<p>, kv_key_scope): what the scoped indexes
-- lead with.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION kv_field_group(field text, type "char", scope text)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
AS $$
SELECT hashtextextended($3 || '/' || $2::text || $1, 0)
$$;
-- +goose StatementEnd

DROP INDEX CONCURRENTLY IF EXISTS kv_fields_num_group;
CREATE INDEX CONCURRENTLY kv_fields_num_group ON kv_fields (kv_field_group(field, type, kv_key_scope(key)), num, key)
    INCLUDE (field, type, expires_at) WHERE num IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_num_scoped;
ALTER INDEX kv_fields_num_group RENAME TO kv_fields_num_scoped;

DROP INDEX CONCURRENTLY IF EXISTS kv_fields_str_group;
CREATE INDEX CONCURRENTLY kv_fields_str_group ON kv_fields (kv_field_group(field, type, kv_key_scope(key)), str, key)
    INCLUDE (field, type, expires_at) WHERE str IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_str_scoped;
ALTER INDEX kv_fields_str_group RENAME TO kv_fields_str_scoped;

ANALYZE kv_fields;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_num_group;
CREATE INDEX CONCURRENTLY kv_fields_num_group ON kv_fields (field, kv_key_scope(key) COLLATE "C", num, key) INCLUDE (expires_at)
    WHERE num IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_num_scoped;
ALTER INDEX kv_fields_num_group RENAME TO kv_fields_num_scoped;

DROP INDEX CONCURRENTLY IF EXISTS kv_fields_str_group;
CREATE INDEX CONCURRENTLY kv_fields_str_group ON kv_fields (field, kv_key_scope(key) COLLATE "C", type, str, key) INCLUDE (expires_at)
    WHERE str IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_str_scoped;
ALTER INDEX kv_fields_str_group RENAME TO kv_fields_str_scoped;

DROP FUNCTION IF EXISTS kv_field_group(text, "char", text);
