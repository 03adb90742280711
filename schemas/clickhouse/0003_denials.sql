-- Denied writes (reason 'forbidden', docs/audit.md "Denied writes"): a
-- write an authenticated principal was refused (403) is recorded in
-- audit_conflicts beside the conflicts, without any value (attempted_hash
-- and current_hash are empty). It is not a conflict: the conflict-rate
-- views and the top conflicting keys leave it out, and denied_writes lists
-- it. A view cannot be altered in ClickHouse 18.16: each is dropped
-- (DROP TABLE drops a view in every release) and created again; a
-- migration interrupted in between completes on the next run, since both
-- statements can be repeated.
DROP TABLE IF EXISTS conflict_rate_minute;

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
    WHERE reason != 'forbidden'
    GROUP BY minute, tenant, project, purpose
)
GROUP BY minute, tenant, project, purpose;

DROP TABLE IF EXISTS conflict_rate_hour;

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
    WHERE reason != 'forbidden'
    GROUP BY hour, tenant, project, purpose
)
GROUP BY hour, tenant, project, purpose;

DROP TABLE IF EXISTS top_conflicting_keys;

CREATE VIEW IF NOT EXISTS top_conflicting_keys AS
SELECT
    key, tenant, project,
    uniqExact(conflict_id) AS conflicts,
    max(ts) AS last_conflict,
    groupUniqArray(purpose) AS purposes,
    groupUniqArray(principal) AS principals
FROM audit_conflicts
WHERE reason != 'forbidden'
GROUP BY key, tenant, project
ORDER BY conflicts DESC, key;

-- Denied writes, one row per denial (FINAL: a replayed record counts once).
CREATE VIEW IF NOT EXISTS denied_writes AS
SELECT
    ts, tenant, project, key, op, principal, request_id, purpose, conflict_id
FROM audit_conflicts FINAL
WHERE reason = 'forbidden';
