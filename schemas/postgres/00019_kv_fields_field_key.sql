-- kv_fields' primary key becomes (field, key), covering the row
-- (INCLUDE type, num, str, expires_at), and takes the place of both the
-- former primary key (key, field) and kv_fields_field_key, which held
-- the same rows in the other order. The projector looks a key's rows up
-- by (field, key) pairs, those of the fields its project declares
-- (projection/store.go, writeFields), and a filtered scan reads a
-- field's rows in key order from it, index only (projection/scan.go).
-- One index fewer to write per field row, and to build in a rebuild
-- (figure 23f of docs/performance.md: at 11 million keys, the former
-- primary key's build was 23.7 s of the restore and its index about
-- 270 bytes a key).
--
-- Built CONCURRENTLY (no lock that stops the projector's writes of
-- kv_fields while a large table is indexed), hence outside a
-- transaction, as migration 00016: an interrupted build leaves an
-- invalid index behind, which the next run drops first. The swap of the
-- constraints is one statement (a catalog change under a brief lock).

-- +goose NO TRANSACTION
-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_field_key_new;
CREATE UNIQUE INDEX CONCURRENTLY kv_fields_field_key_new ON kv_fields (field, key) INCLUDE (type, num, str, expires_at);
ALTER TABLE kv_fields DROP CONSTRAINT kv_fields_pkey,
    ADD CONSTRAINT kv_fields_pkey PRIMARY KEY USING INDEX kv_fields_field_key_new;
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_field_key;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS kv_fields_key_field;
CREATE UNIQUE INDEX CONCURRENTLY kv_fields_key_field ON kv_fields (key, field);
CREATE INDEX CONCURRENTLY IF NOT EXISTS kv_fields_field_key ON kv_fields (field, key) INCLUDE (type, num, str, expires_at);
ALTER TABLE kv_fields DROP CONSTRAINT kv_fields_pkey,
    ADD CONSTRAINT kv_fields_pkey PRIMARY KEY USING INDEX kv_fields_key_field;
