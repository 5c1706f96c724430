-- The retry window and fetched-write monotonicity.
--
-- webhook_inbox.first_failed_at: when the event's current run of failures
-- began. A failing event is retried until processor.retry_window has passed
-- since then (attempts alone would let a few minutes of provider outage kill
-- a hint); a replay clears it, so a replayed event gets a whole window again.
--
-- subscription_projection.fetched_at: the database clock when the fetch that
-- wrote the projection started (taken before the provider call). A fetched
-- write whose fetch started earlier does not overwrite it: a worker that
-- lost its partition (or handled a key that moved to a new partition) cannot
-- put back an older observation.

-- +goose Up
ALTER TABLE webhook_inbox ADD COLUMN first_failed_at timestamptz;
ALTER TABLE subscription_projection ADD COLUMN fetched_at timestamptz;

-- +goose Down
ALTER TABLE subscription_projection DROP COLUMN fetched_at;
ALTER TABLE webhook_inbox DROP COLUMN first_failed_at;
