-- +goose Up
-- The status page's logouts (api/uilogouts.go): per token reference (an
-- HMAC of the token's hash under the writers' shared UI key, never the
-- token), the time up to which its sessions are ended. Every writer
-- checks a session cookie against it, so a cookie presented after its
-- logout is refused by all of them. One row per token logged out of; a
-- row older than the session TTL (and a day) ends no live session any
-- more and is deleted at the next logout.
CREATE TABLE ui_logouts (
    token_ref   bytea PRIMARY KEY,
    ended_until timestamptz NOT NULL
);

-- +goose Down
DROP TABLE ui_logouts;
