-- kv_history may keep each new event as the text the projector read
-- (event_text) instead of jsonb (event), and its requestId in a column of
-- its own (request_id, NULL when the event carries none), when the
-- projector's ESKV_HISTORY_FORMAT is text (the default, jsonb, writes
-- event as before: the releases before this migration read only that),
-- for the projector's CPU per event (docs/performance.md, "kv_history's cost per
-- event"): parsing every event into jsonb's binary form, and evaluating
-- kv_history_request_id's expression and predicate on it, cost Postgres
-- 4.6 - 7.9 µs per projected event more than this, for reads that are rare
-- (GET :history, a requestId lookup that finds a row, projector diff),
-- which now parse the text they read (event_text::jsonb). The events are
-- JSON the projector has already decoded (changelog.EventVerbatim, or
-- Event's own encoding).
--
-- Rows written before this migration, and the jsonb rows written after
-- it, keep their event in event (jsonb) and no request_id; text rows have
-- event NULL. Every reader reads coalesce(event, event_text::jsonb), and
-- the requestId lookup asks both indexes (kv_history_request_id for the
-- jsonb rows, kv_history_request of migration 00012 for the text ones):
-- see projection/requests.go.
--
-- Nothing is rewritten: new nullable columns without a default, NOT NULL
-- dropped, and a CHECK added NOT VALID (checked for new rows only; the old
-- rows satisfy it, and "ALTER TABLE kv_history VALIDATE CONSTRAINT
-- kv_history_one_event" would confirm it without blocking writes). The
-- statement takes kv_history's ACCESS EXCLUSIVE lock for an instant;
-- lock_timeout keeps it from queueing every reader behind a long
-- transaction on the table: the migration fails instead (the service
-- exits and is restarted) and runs again at the next start.
--
-- Later, once text is the only format written and no jsonb row is left
-- (history retention removed them, or a batched "UPDATE kv_history SET
-- event_text = event::text, request_id = event->>'requestId', event =
-- NULL WHERE ..." converted them), a release whose readers no longer read event drops it:
-- "DROP INDEX CONCURRENTLY kv_history_request_id" and "ALTER TABLE
-- kv_history DROP COLUMN event" (both without a rewrite).

-- +goose Up
SET LOCAL lock_timeout = '5s';
ALTER TABLE kv_history
    ALTER COLUMN event DROP NOT NULL,
    ADD COLUMN event_text text,
    ADD COLUMN request_id text COLLATE "C",
    ADD CONSTRAINT kv_history_one_event CHECK ((event IS NULL) <> (event_text IS NULL)) NOT VALID;

-- +goose Down
-- Only when no row has its event in event_text (it would be lost).
SET LOCAL lock_timeout = '5s';
ALTER TABLE kv_history
    DROP CONSTRAINT kv_history_one_event,
    DROP COLUMN request_id,
    DROP COLUMN event_text,
    ALTER COLUMN event SET NOT NULL;
