-- Lists (docs/collections.md): a list element's value lives in its
-- kv_elements row, whose member is the element's fixed-width position
-- (events.ListPosition), so a range of the list (lrange) is one range
-- scan of the primary key returning the values. A set's rows have none
-- (NULL). text, not jsonb: the compact JSON the writer validated and the
-- event carries, byte for byte, as kv_entries keeps values.

-- +goose Up
ALTER TABLE kv_elements ADD COLUMN value text;

-- +goose Down
ALTER TABLE kv_elements DROP COLUMN value;
