-- Hash scheme 2 (docs/audit.md, "Hash schemes"): every row records the
-- scheme its hashes and chain hash were computed with, and verification
-- recomputes each row under its own. Rows written before this migration
-- read as 1 (the DEFAULT), the scheme they were hashed with; the auditor
-- writes 2 explicitly into every new row.
--
-- Like 0001, written for both ClickHouse 18.16 and current releases: UInt8
-- (no Bool, no LowCardinality), and plain ADD COLUMN, since 18.16 has no
-- ADD COLUMN IF NOT EXISTS. audit.Migrate treats "column already exists"
-- from an ADD COLUMN as done, so a run interrupted between the two
-- statements (or two auditors migrating at once) completes on the next.
ALTER TABLE audit_events ADD COLUMN hash_scheme UInt8 DEFAULT 1 AFTER hash_key_id;
ALTER TABLE audit_conflicts ADD COLUMN hash_scheme UInt8 DEFAULT 1 AFTER hash_key_id;
