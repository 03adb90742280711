-- Collections (docs/collections.md): a row of audit_events of a set's
-- sadd or srem names the element change it made: element_op (add or
-- remove) and element_hash, the member hashed like values (HMAC under
-- hash_key_id, in the row's hash scheme), so a compliance reader can
-- follow one member through a set's history ("when was X added, by whom")
-- by hashing X, without the trail holding the member. Rows of every
-- other event, and every row written before this migration, read as ''.
-- The chain hash covers both only when element_op is set, so older rows
-- hash as before.
--
-- Like 0004, plain ADD COLUMN for both ClickHouse 18.16 and current
-- releases (audit.Migrate treats "column already exists" as done).
ALTER TABLE audit_events ADD COLUMN element_op String DEFAULT '' AFTER txn_size;
ALTER TABLE audit_events ADD COLUMN element_hash String DEFAULT '' AFTER element_op;
