-- Transactions (POST /v1/txn, docs/audit.md "Transactions"): every row of
-- audit_events of one eskv transaction carries its txn_id and txn_size
-- (the number of events it appended); the one audit_conflicts row of a
-- rejected transaction carries its txn_id, the index of its first failing
-- operation (txn_op, from 0) and its size. Rows of single writes, and
-- every row written before this migration, read as '' / 0 / -1.
--
-- Like 0002 and 0003, written for both ClickHouse 18.16 and current
-- releases: plain ADD COLUMN (audit.Migrate treats "column already exists"
-- as done, so an interrupted run completes on the next), and views
-- dropped (DROP TABLE drops a view in every release) and created again.
ALTER TABLE audit_events ADD COLUMN txn_id String DEFAULT '' AFTER kafka_offset;
ALTER TABLE audit_events ADD COLUMN txn_size Int32 DEFAULT 0 AFTER txn_id;
ALTER TABLE audit_conflicts ADD COLUMN txn_id String DEFAULT '' AFTER kafka_offset;
ALTER TABLE audit_conflicts ADD COLUMN txn_op Int32 DEFAULT -1 AFTER txn_id;
ALTER TABLE audit_conflicts ADD COLUMN txn_size Int32 DEFAULT 0 AFTER txn_op;

-- The conflict rates count write requests: a single write or a whole
-- transaction once as applied (the rows of a transaction share txn_id),
-- and a rejected write or a rejected transaction once as a conflict (it is
-- one record). A transaction that changed keys of several purposes counts
-- once in each.
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
        uniqExact(if(txn_id = '', key, txn_id), if(txn_id = '', version, 0)) AS a, toUInt64(0) AS c
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
        uniqExact(if(txn_id = '', key, txn_id), if(txn_id = '', version, 0)) AS a, toUInt64(0) AS c
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

-- One row per applied transaction: when, who, what it touched, and
-- whether the trail holds all of it (events = txn_size; fewer while the
-- auditor catches up).
CREATE VIEW IF NOT EXISTS transactions AS
SELECT
    txn_id, tenant, project,
    min(ts) AS ts,
    any(principal) AS principal,
    any(request_id) AS request_id,
    any(txn_size) AS txn_size,
    uniqExact(key, version) AS events,
    groupUniqArray(purpose) AS purposes
FROM audit_events
WHERE txn_id != ''
GROUP BY txn_id, tenant, project;

-- Rejected transactions, one row each (FINAL: a replayed record counts
-- once), with the failing operation's key and index.
CREATE VIEW IF NOT EXISTS rejected_transactions AS
SELECT
    ts, txn_id, txn_op, txn_size, tenant, project, key, op, reason, principal, request_id, conflict_id
FROM audit_conflicts FINAL
WHERE txn_id != '';
