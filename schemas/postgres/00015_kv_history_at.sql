-- Reads of the past (GET /v1/kv/{key}?at=, GET /v1/kv?prefix=&at=;
-- projection/at.go) look a key's history up by log position and resolve
-- a time to a position:
--
-- kv_history_key_offset: (key, kafka_offset) -> the key's newest event at
-- or before an offset, one index descent per key (a key's versions and
-- offsets grow together, but the primary key (key, version) can only be
-- walked back from the newest version, one row per later version).
--
-- kv_history_partition_ts: (partition, ts, kafka_offset) -> the latest
-- event of a partition by event time at or before a time, one descent.
--
-- Both cost every projected event an index entry. Built CONCURRENTLY (no
-- lock that stops the projector's inserts), hence outside a transaction;
-- an interrupted build leaves an invalid index behind, which the next run
-- drops first.

-- +goose NO TRANSACTION
-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS kv_history_key_offset;
CREATE INDEX CONCURRENTLY kv_history_key_offset ON kv_history (key, kafka_offset);
DROP INDEX CONCURRENTLY IF EXISTS kv_history_partition_ts;
CREATE INDEX CONCURRENTLY kv_history_partition_ts ON kv_history (partition, ts, kafka_offset);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS kv_history_partition_ts;
DROP INDEX CONCURRENTLY IF EXISTS kv_history_key_offset;
