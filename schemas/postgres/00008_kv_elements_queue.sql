-- Queues (docs/collections.md "Queues"): a queue item is a kv_elements
-- row whose member is events.QueueMember(since, priority, push version),
-- so byte order (COLLATE "C") is (incarnation, priority, FIFO), and whose
-- value is the item's data. These columns hold the rest of its state, as
-- the item's latest event carries it (events.Element): the projector
-- upserts the row to exactly that state or deletes it. NULL on the rows
-- of sets and lists.
--
-- Nullable columns without defaults: adding them rewrites nothing on an
-- existing deployment. The indexes are partial, so they hold only queue
-- rows (none on a deployment upgraded from before queues): building
-- them scans kv_elements once and stores nothing of its set and list rows.
--
--   ready:    the next item of a queue is the first row of this index in
--             the queue incarnation's member range (pop, peek): O(log n).
--   inflight: the writer's sweeper finds the in-flight items past their
--             deadline (visible_at <= now) without scanning the queue.
--   dedup:    a push with a dedupId probes this queue's items with it.

-- +goose Up
ALTER TABLE kv_elements
    ADD COLUMN state text,
    ADD COLUMN deliveries int,
    ADD COLUMN visible_at timestamptz,
    ADD COLUMN dedup text COLLATE "C",
    ADD COLUMN pushed_at timestamptz;
CREATE INDEX kv_elements_queue_ready ON kv_elements (collection, member) WHERE state = 'ready';
CREATE INDEX kv_elements_queue_inflight ON kv_elements (visible_at, collection) WHERE state = 'inflight';
CREATE INDEX kv_elements_queue_dedup ON kv_elements (collection, dedup, pushed_at) WHERE dedup IS NOT NULL;

-- +goose Down
DROP INDEX kv_elements_queue_dedup;
DROP INDEX kv_elements_queue_inflight;
DROP INDEX kv_elements_queue_ready;
ALTER TABLE kv_elements
    DROP COLUMN pushed_at,
    DROP COLUMN dedup,
    DROP COLUMN visible_at,
    DROP COLUMN deliveries,
    DROP COLUMN state;
