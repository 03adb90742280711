-- Queue receipts (docs/collections.md "Queues", "Receipts"): a pop with a
-- visibility timeout gives its delivery a random nonce of 128 bits
-- (events.Element.ReceiptNonce) that its receipt carries and an ack must
-- name, so a receipt cannot be derived from the item's id. Every event of
-- the delivery carries it; the projector stores it here so that the
-- owner checks an ack against it once its overlay no longer holds the
-- item, and a rebuild from kv.changes restores it. NULL: no delivery in
-- flight, or one popped before receipts had a nonce (acknowledged with
-- the receipt <item>#<delivery> until it ends), and on every set and list
-- row.
--
-- A nullable column without a default: adding it rewrites nothing. No
-- index: it is read with the row, by primary key.

-- +goose Up
ALTER TABLE kv_elements ADD COLUMN receipt_nonce text;

-- +goose Down
ALTER TABLE kv_elements DROP COLUMN receipt_nonce;
