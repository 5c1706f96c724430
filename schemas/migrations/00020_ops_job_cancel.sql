-- An operator may cancel a running job (console, POST /v1/jobs/{id}/cancel,
-- `hookyard jobs cancel`): the flag is read by the runner's step write, so
-- the job stops at its next step boundary with the progress it made, never
-- in the middle of a step.

--
-- The console's overview counts the divergences seen in the last 24 hours;
-- reconcile_divergence_seen keeps that count a range read however many
-- divergences were ever recorded.

-- +goose Up
ALTER TABLE ops_job ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS reconcile_divergence_seen ON reconcile_divergence (last_seen_at);

-- +goose Down
DROP INDEX IF EXISTS reconcile_divergence_seen;
ALTER TABLE ops_job DROP COLUMN cancel_requested;
