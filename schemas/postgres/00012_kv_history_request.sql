-- The requestId lookup's index over the rows written as text (migration
-- 00011, projection/requests.go): (key, request_id) -> the newest
-- version, like kv_history_request_id (00005) over the jsonb rows, but on
-- a plain column, so that indexing a projected event computes nothing
-- from its JSON. Events without a requestId are left out of it.
--
-- Built CONCURRENTLY (no lock that stops the projector's inserts or the
-- lookups), hence outside a transaction. An interrupted build leaves an
-- invalid index behind, which the next run drops first.

-- +goose NO TRANSACTION
-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS kv_history_request;
CREATE INDEX CONCURRENTLY kv_history_request ON kv_history (key, request_id, version)
    WHERE request_id IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS kv_history_request;
