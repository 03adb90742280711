-- Collections (docs/collections.md): the elements of a collection key,
-- one row each. A set's row is (collection key, member); member is data
-- of any content (UTF-8, up to events.MaxMemberBytes), never part of a
-- key. COLLATE "C" makes the primary key's order byte order, so a page of
-- members (smembers) is one range scan of it after a cursor, and a
-- membership test one probe: O(log n) whatever the set's size.
--
-- version is the version of the collection's event that last added the
-- element. A row whose version is below the collection's metadata
-- "since" (the version that created it) belongs to an earlier collection
-- of the same key, deleted or expired since: it is not an element, and
-- every read skips it. Deleting a collection is thus one event, whatever
-- its size.
--
-- Written by the projector in the transaction that folds the events
-- (projection.Store.Apply), before the kv_entries upsert, and only from
-- events newer than the collection's stored version: a replayed event
-- changes nothing. Queues and lists add their columns (priority,
-- sequence, data, visibility) here or beside it in their own migration.

-- +goose Up
CREATE TABLE kv_elements (
    collection text COLLATE "C" NOT NULL,
    member text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    PRIMARY KEY (collection, member)
);

-- +goose Down
DROP TABLE kv_elements;
