-- The projection of kv.changes: current state per key, every version of
-- every key, and the projector's next offset per partition. Written only by
-- the projector (one transaction per batch); read by the writer (CAS
-- validation) and the API (gets and lists).

-- +goose Up

-- Current state per key. A deleted or expired key keeps its row with
-- live = false and its last version, so a re-create continues from it and
-- versions never go back.
CREATE TABLE kv_entries (
    -- COLLATE "C": keys compare by bytes, so the primary key serves prefix
    -- range scans (key >= prefix AND key < prefix+1) and lists sort by bytes.
    key            text COLLATE "C" PRIMARY KEY,
    scope          text COLLATE "C" NOT NULL,
    partition      int NOT NULL,
    version        bigint NOT NULL CHECK (version > 0),
    live           boolean NOT NULL,
    -- The compact JSON exactly as in the event's "after", kept as text so
    -- reads return the writer's bytes. NULL when not live; the JSON literal
    -- null is the text 'null'.
    value          text,
    created_at     timestamptz,
    updated_at     timestamptz NOT NULL,
    expires_at     timestamptz,
    last_writer    text NOT NULL DEFAULT '',
    request_id     text NOT NULL DEFAULT '',
    request_digest text NOT NULL DEFAULT '',
    spec_ref       text NOT NULL DEFAULT '',
    semantics      jsonb NOT NULL DEFAULT '{}',
    kafka_offset   bigint NOT NULL,
    CHECK (live OR value IS NULL)
);

-- Prefix listing of live rows: a range scan over live keys only, so deleted
-- keys left behind do not slow lists down.
CREATE INDEX kv_entries_live_key ON kv_entries (key) WHERE live;

-- The TTL sweeper of a partition's owner: live entries of its partitions
-- with an expiry, oldest first.
CREATE INDEX kv_entries_expiry ON kv_entries (partition, expires_at)
    WHERE live AND expires_at IS NOT NULL;

-- Every event ever applied. The compacted topic forgets old versions;
-- Postgres keeps them. (key, version) is an event's identity.
CREATE TABLE kv_history (
    key          text COLLATE "C" NOT NULL,
    version      bigint NOT NULL,
    kind         text NOT NULL,
    op           text NOT NULL,
    ts           timestamptz NOT NULL,
    partition    int NOT NULL,
    kafka_offset bigint NOT NULL,
    event        jsonb NOT NULL,
    PRIMARY KEY (key, version)
);

-- The next offset to read per partition of a topic, stored in the same
-- transaction as the rows it covers (exactly-once into Postgres). It never
-- moves backwards.
CREATE TABLE projector_offsets (
    topic       text NOT NULL,
    partition   int NOT NULL,
    next_offset bigint NOT NULL CHECK (next_offset >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, partition)
);

-- +goose Down
DROP TABLE projector_offsets;
DROP TABLE kv_history;
DROP TABLE kv_entries;
