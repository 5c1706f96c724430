-- Outbox rows the broker refused for good (too large, invalid record): the
-- relay moves them here, with the broker's error, instead of retrying them
-- at the head of the outbox forever. Nothing is dropped; an operator can
-- inspect them and, once the cause is fixed, move them back:
--   WITH moved AS (DELETE FROM outbox_dead WHERE ... RETURNING id, message_key, message, created_at)
--   INSERT INTO outbox (id, message_key, message, created_at) SELECT * FROM moved;

-- +goose Up
CREATE TABLE outbox_dead (
    id              bigint      PRIMARY KEY,
    message_key     text        NOT NULL,
    message         text        NOT NULL,
    created_at      timestamptz NOT NULL,
    failed_at       timestamptz NOT NULL DEFAULT now(),
    error           text        NOT NULL
);

-- +goose Down
DROP TABLE outbox_dead;
