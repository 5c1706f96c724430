-- The reconciler asks, for each published pending event, whether its
-- message is in outbox_dead (refused for good: publishing it again fails
-- again). By key and publication time, through this index, so the answer
-- never reads the whole table.

-- +goose Up
CREATE INDEX IF NOT EXISTS outbox_dead_published ON outbox_dead (message_key, created_at);

-- +goose Down
DROP INDEX IF EXISTS outbox_dead_published;
