-- +goose Up
-- The provider's own time of an event (Stripe "created", Chargebee
-- "occurred_at", Standard Webhooks "timestamp"), shown by `hookyard explain`
-- beside received_at. Intake fills it from the payload; for rows stored
-- before that (or GitHub's, which carry no time) explain reads the payload
-- while it is kept, and purge moves the time here before dropping it.
ALTER TABLE webhook_inbox ADD COLUMN IF NOT EXISTS occurred_at timestamptz;

-- What a write found and what it wrote, so a timeline reads "active → canceled"
-- and a reconciliation check says whether it found a divergence.
-- previous_status: NULL = not recorded (older rows, no write attempted);
-- '' = there was no projection; 'deleted' = a tombstone; 'unknown' = a
-- projection without a status; else the projection's status.
ALTER TABLE projection_history ADD COLUMN IF NOT EXISTS previous_status text;
ALTER TABLE projection_history ADD COLUMN IF NOT EXISTS deleted boolean;

-- The backlog gauges read these on every scrape. Both hold only unfinished
-- rows, so they stay as small as the backlog. On a large existing inbox,
-- create them beforehand with CREATE INDEX CONCURRENTLY (same name and
-- definition); this migration then skips them. (Drop an INVALID one left by
-- a failed concurrent build first: IF NOT EXISTS would keep it.)
CREATE INDEX IF NOT EXISTS webhook_inbox_unfinished ON webhook_inbox (status, received_at)
    WHERE status IN ('pending', 'retrying');
CREATE INDEX IF NOT EXISTS action_open ON action (kind, status) WHERE status <> 'done';
-- The reconciler reads parked projections every round.
CREATE INDEX IF NOT EXISTS subscription_projection_parked ON subscription_projection (provider)
    WHERE needs_reconcile;

-- +goose Down
DROP INDEX IF EXISTS subscription_projection_parked;
DROP INDEX IF EXISTS action_open;
DROP INDEX IF EXISTS webhook_inbox_unfinished;
ALTER TABLE projection_history DROP COLUMN IF EXISTS deleted;
ALTER TABLE projection_history DROP COLUMN IF EXISTS previous_status;
ALTER TABLE webhook_inbox DROP COLUMN IF EXISTS occurred_at;
