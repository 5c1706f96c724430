-- The W3C traceparent of an event's intake, so that a retry, a requeue or
-- a replay (re-enqueued by SQL, long after the original outbox row is gone)
-- can link its trace to the webhook's original one. Nullable and without a
-- default: adding it rewrites nothing, and rows from before stay NULL.

-- An action keeps the traceparent of the event that recorded it, so that
-- its sends (asynchronous, possibly many) join or link to that trace.

-- +goose Up
ALTER TABLE webhook_inbox ADD COLUMN IF NOT EXISTS trace_parent text;
ALTER TABLE action ADD COLUMN IF NOT EXISTS trace_parent text;

-- +goose Down
ALTER TABLE action DROP COLUMN IF EXISTS trace_parent;
ALTER TABLE webhook_inbox DROP COLUMN IF EXISTS trace_parent;
