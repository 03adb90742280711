-- Filtered scans by value, scoped to the scan's project (figure 23c of
-- docs/performance.md). A scan whose matches are rare goes value first
-- (projection/scan.go): kv_fields_num and kv_fields_str, (field, value,
-- key), held every project's matches of the field, and the prefix was
-- checked after them, so a scan of one project read the matches of all
-- of them (3.2 times the 10,000-key baseline's p99 at 2.2 million keys
-- over 21 projects). Every listing prefix starts with its scope,
-- tenant/<t>/project/<p>/ (contract.ValidatePrefix), so the indexes now
-- lead with it after the field: a scan reads its own project's matches
-- only. The scope is the key up to its fourth '/' (kv_key_scope, as
-- contract.ScopeOf), computed in the index, so kv_fields keeps its
-- columns and its writers do not change.
--
-- Built CONCURRENTLY (no lock that stops the projector's writes of
-- kv_fields while a large table is indexed), hence outside a transaction,
-- as migrations 00012 and 00015: an interrupted build leaves an invalid
-- index behind, which the next run drops first. Until the former indexes
-- are dropped, scans may use either: both answer the same rows.

-- +goose NO TRANSACTION
-- +goose Up

-- kv_key_scope returns a key's scope, tenant/<t>/project/<p>: the key up
-- to its fourth '/' (every key has one).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION kv_key_scope(key text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
AS $$
SELECT split_part($1, '/', 1) || '/' || split_part($1, '/', 2) || '/' || split_part($1, '/', 3) || '/' || split_part($1, '/', 4)
$$;
-- +goose StatementEnd

DROP INDEX CONCURRENTLY IF EXISTS kv_fields_num_scoped;
CREATE INDEX CONCURRENTLY kv_fields_num_scoped ON kv_fields (field, kv_key_scope(key) COLLATE "C", num, key) INCLUDE (expires_at)
    WHERE num IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_str_scoped;
CREATE INDEX CONCURRENTLY kv_fields_str_scoped ON kv_fields (field, kv_key_scope(key) COLLATE "C", type, str, key) INCLUDE (expires_at)
    WHERE str IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_num;
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_str;

ANALYZE kv_fields;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS kv_fields_num ON kv_fields (field, num, key) INCLUDE (expires_at)
    WHERE num IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS kv_fields_str ON kv_fields (field, type, str, key) INCLUDE (expires_at)
    WHERE str IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_num_scoped;
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_str_scoped;
DROP FUNCTION IF EXISTS kv_key_scope(text);
