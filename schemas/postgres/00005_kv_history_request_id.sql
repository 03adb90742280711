-- Idempotency beyond a key's latest write: the writer looks up "(key,
-- requestId) -> the newest version that carried it, and its request
-- digest" in kv_history (projection.Store.StatesAndRequests), so a retry
-- of an older write answers 409 version_conflict instead of being applied
-- again. kv_history already holds every projected event's JSON; this
-- index makes the lookup one index probe per (key, requestId), newest
-- version first. Events without a requestId (the sweeper's expires,
-- writes that gave none) are left out of it.
--
-- The writer only counts a version among the key's last
-- ESKV_REQUEST_ID_WINDOW versions (README, Guarantees): the index holds
-- every version, the decision ignores the older ones.

-- +goose Up
CREATE INDEX kv_history_request_id ON kv_history (key, (event->>'requestId'), version)
    WHERE event ? 'requestId';

-- +goose Down
DROP INDEX kv_history_request_id;
