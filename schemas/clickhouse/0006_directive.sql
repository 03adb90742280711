-- Directive (docs/audit.md): the directive a write was made for, the
-- part after ':' of a principal named <agent>:<directive> or the
-- Eskv-Directive header of a service account's request. Rows written
-- before this migration, and rows of writes that named none, read as ''.
-- The chain hash of audit_events covers directive only when it is set
-- (like txn_id and element_op), so older rows hash as before, in both
-- hash schemes; audit_conflicts rows have no chain.
--
-- Like 0004 and 0005, plain ADD COLUMN for both ClickHouse 18.16 and
-- current releases (audit.Migrate treats "column already exists" as done).
ALTER TABLE audit_events ADD COLUMN directive String DEFAULT '' AFTER principal;
ALTER TABLE audit_conflicts ADD COLUMN directive String DEFAULT '' AFTER principal;
