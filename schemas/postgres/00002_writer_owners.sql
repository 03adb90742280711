-- +goose Up
-- Which writer owns which partition of kv.changes, and where it answers:
-- a writer that receives a request for a key it does not own forwards it
-- to the owner named here. A row is written by a writer once it fenced
-- and caught up the partition; a stale row (its writer lost the
-- partition) only costs a forwarded 503 until the new owner overwrites it.
CREATE TABLE writer_owners (
    partition  int PRIMARY KEY,
    owner      text NOT NULL,
    addr       text NOT NULL,
    epoch      bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE writer_owners;
