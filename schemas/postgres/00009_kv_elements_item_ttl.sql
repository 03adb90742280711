-- Queue item TTL (docs/collections.md "Queues", "Item TTL"): a push with
-- itemTtlSeconds gives its item its own expiry, pushedAt + TTL, which
-- every event of the item carries (events.Element.ExpiresAt) and the
-- projector stores here. NULL: the item never expires (and on every set,
-- list and earlier queue row).
--
-- A nullable column without a default: adding it rewrites nothing. The
-- index is partial, so it holds only the live queue items that have a
-- TTL: the writer's sweeper reads the ones past their expiry
-- (expires_at <= now, earliest first, of every queue of its partitions)
-- as one range of it, like kv_elements_queue_inflight, so it leads with
-- expires_at. Pop and peek read kv_elements_queue_ready and skip the
-- expired rows they meet there, at most the expiries of one sweep
-- interval.

-- +goose Up
ALTER TABLE kv_elements ADD COLUMN expires_at timestamptz;
CREATE INDEX kv_elements_queue_expiry ON kv_elements (expires_at, collection)
    WHERE state IN ('ready', 'inflight') AND expires_at IS NOT NULL;

-- +goose Down
DROP INDEX kv_elements_queue_expiry;
ALTER TABLE kv_elements DROP COLUMN expires_at;
