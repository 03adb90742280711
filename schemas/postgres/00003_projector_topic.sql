-- The identity of the changes topic the projection was folded from, so a
-- projector notices a topic that was deleted and recreated under the same
-- name (its offsets would then point into another log). Written once, at
-- the first start of a projector (or by a rebuild); compared at every
-- start, assignment and periodic check afterwards.

-- +goose Up

CREATE TABLE projector_topic (
    topic      text PRIMARY KEY,
    -- The Kafka topic ID (a UUID, base64 as kadm prints it).
    topic_id   text NOT NULL,
    -- The partition count seen at first start: kv.changes must never
    -- change it.
    partitions int NOT NULL CHECK (partitions > 0),
    first_seen timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE projector_topic;
