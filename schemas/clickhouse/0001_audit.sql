-- eskv audit trail in ClickHouse, applied by the auditor (audit.Migrate) in
-- file order; each file runs once per database, recorded in
-- audit_schema_migrations. Statements are separated by a semicolon at the
-- end of a line.
--
-- Written for both ClickHouse 18.16 (Debian's package, used by tests and
-- `make run`) and current releases, so it keeps to what both accept: no
-- DateTime64 (a DateTime plus a microsecond column), no LowCardinality, no
-- Map or Bool, no TTL or CODEC clauses, no ADD COLUMN IF NOT EXISTS.
-- Every table is keyed by the identity of what it records, so a replayed
-- insert (the auditor re-reads what it had not committed to Kafka yet)
-- leaves one row per identity once parts merge; the documented queries
-- (docs/audit.md) and the views below count distinct identities or read
-- with FINAL, so they never see a duplicate, merged or not.
--
-- Raw values never reach these tables: only HMAC-SHA256 hashes of their RFC
-- 8785 canonical JSON, under the audit key named by hash_key_id.

-- One row per applied event of kv.changes: identity (key, version).
CREATE TABLE IF NOT EXISTS audit_events (
    ts DateTime,                   -- event time (server time of the writer), UTC, seconds
    ts_us Int64,                   -- the same instant in Unix microseconds
    tenant String,
    project String,
    key String,
    version Int64,
    prev_version Int64,
    kind String,                   -- put | delete | expire
    op String,                     -- set | create | cas | delete | expire | ...
    purpose String,
    producer String,
    consumer_hints Array(String),
    principal String,
    request_id String,
    spec_ref String,
    ttl_seconds Int64,             -- 0: no TTL
    expires_at_us Int64,           -- Unix microseconds; 0: no expiry
    before_hash String,            -- hex HMAC-SHA256 of the canonical JSON of the value before
    after_hash String,             -- hex HMAC-SHA256 of the canonical JSON of the value after
    hash_key_id String,            -- id of the audit key of every hash in the row
    prev_chain_hash String,        -- chain_hash of (key, prev_version); '' when the auditor never saw it
    chain_hash String,             -- hex HMAC-SHA256 over this row's fields and prev_chain_hash
    kafka_partition Int32,
    kafka_offset Int64,
    ingested_at DateTime           -- when the auditor inserted the row (not part of the chain)
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (key, version);

-- One row per rejected write of kv.conflicts: identity (key, conflict_id).
CREATE TABLE IF NOT EXISTS audit_conflicts (
    ts DateTime,
    ts_us Int64,
    conflict_id String,            -- correlation id of the 409 answer and the writer's WARN log
    tenant String,
    project String,
    key String,
    op String,
    reason String,                 -- version_mismatch | request_id_reused | field_mismatch
    purpose String,
    producer String,
    consumer_hints Array(String),
    principal String,
    request_id String,
    spec_ref String,
    expected_version Int64,        -- -1: the request had no expectedVersion
    current_version Int64,
    attempted_hash String,         -- hex HMAC-SHA256 of the canonical JSON of the attempted value
    current_hash String,           -- hex HMAC-SHA256 of the canonical JSON of the current value
    hash_key_id String,
    kafka_partition Int32,
    kafka_offset Int64,
    ingested_at DateTime
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(ts)
ORDER BY (key, conflict_id);

-- Conflict-rate alerts: a row when a (tenant, project, purpose) starts
-- firing and one when it resolves.
CREATE TABLE IF NOT EXISTS audit_alerts (
    at DateTime,
    tenant String,
    project String,
    purpose String,
    state String,                  -- firing | resolved
    rate Float64,                  -- conflict rate over the window at that evaluation
    conflicts UInt64,
    applied UInt64,
    window_seconds UInt32,
    threshold Float64,
    auditor String                 -- instance that raised it
) ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(at)
ORDER BY (tenant, project, purpose, at, state);

-- Applied writes (puts and deletes; expirations are not writes) and
-- conflicts per tenant, project, purpose and minute, without duplicates.
CREATE VIEW IF NOT EXISTS conflict_rate_minute AS
SELECT
    minute, tenant, project, purpose,
    sum(a) AS applied,
    sum(c) AS conflicts,
    if(sum(a) + sum(c) = 0, 0, sum(c) / (sum(a) + sum(c))) AS rate
FROM
(
    SELECT toStartOfMinute(ts) AS minute, tenant, project, purpose,
        uniqExact(key, version) AS a, toUInt64(0) AS c
    FROM audit_events
    WHERE kind IN ('put', 'delete')
    GROUP BY minute, tenant, project, purpose
    UNION ALL
    SELECT toStartOfMinute(ts) AS minute, tenant, project, purpose,
        toUInt64(0) AS a, uniqExact(key, conflict_id) AS c
    FROM audit_conflicts
    GROUP BY minute, tenant, project, purpose
)
GROUP BY minute, tenant, project, purpose;

-- The same per hour.
CREATE VIEW IF NOT EXISTS conflict_rate_hour AS
SELECT
    hour, tenant, project, purpose,
    sum(a) AS applied,
    sum(c) AS conflicts,
    if(sum(a) + sum(c) = 0, 0, sum(c) / (sum(a) + sum(c))) AS rate
FROM
(
    SELECT toStartOfHour(ts) AS hour, tenant, project, purpose,
        uniqExact(key, version) AS a, toUInt64(0) AS c
    FROM audit_events
    WHERE kind IN ('put', 'delete')
    GROUP BY hour, tenant, project, purpose
    UNION ALL
    SELECT toStartOfHour(ts) AS hour, tenant, project, purpose,
        toUInt64(0) AS a, uniqExact(key, conflict_id) AS c
    FROM audit_conflicts
    GROUP BY hour, tenant, project, purpose
)
GROUP BY hour, tenant, project, purpose;

-- Keys by number of rejected writes, with their last rejection.
CREATE VIEW IF NOT EXISTS top_conflicting_keys AS
SELECT
    key, tenant, project,
    uniqExact(conflict_id) AS conflicts,
    max(ts) AS last_conflict,
    groupUniqArray(purpose) AS purposes,
    groupUniqArray(principal) AS principals
FROM audit_conflicts
GROUP BY key, tenant, project
ORDER BY conflicts DESC, key;

-- TTL expirations with the semantic context of the expired entry.
CREATE VIEW IF NOT EXISTS ttl_expirations AS
SELECT
    ts, tenant, project, key, version, purpose, producer, consumer_hints,
    principal, request_id, spec_ref, ttl_seconds, expires_at_us, before_hash, hash_key_id
FROM audit_events FINAL
WHERE kind = 'expire';
