-- Room for HOT updates in kv_entries (docs/performance.md, "Postgres cost
-- of projecting hot keys"). Every write of a key updates its row; an
-- update is HOT (no new entry in any index, the old version pruned from
-- the page by the next reader) only when the new version fits on the
-- row's page, and none of the indexed columns changes (key, live,
-- partition, expires_at: a put over a live key without an expiry changes
-- none). With pages filled to the brim, a burst of updates to the keys of
-- one page, or a moment when pruning is held back (an open snapshot, an
-- ANALYZE), makes them non-HOT: a new entry in each of the three indexes
-- for every write, dead index entries that every later probe of the key
-- steps over, and a heap that grows page by page.
--
-- fillfactor 80 keeps a fifth of every page that an insert fills for the
-- updates of its rows. Setting it rewrites nothing: it applies to the
-- pages filled from now on (a VACUUM FULL or pg_repack would apply it to
-- the rest, if ever wanted). kv_elements is left as it is: a queue item's
-- updates change its state, which three of its indexes' predicates read,
-- so they cannot be HOT; what a set's or a list's would gain is not
-- measured.

-- +goose Up
ALTER TABLE kv_entries SET (fillfactor = 80);

-- +goose Down
ALTER TABLE kv_entries RESET (fillfactor);
