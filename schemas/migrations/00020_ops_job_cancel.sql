-- An operator may cancel a running job (console, POST /v1/jobs/{id}/cancel,
-- `hookyard jobs cancel`): the flag is read by the runner's step write, so
-- the job stops at its next step boundary with the progress it made, never
-- in the middle of a step.

-- +goose Up
ALTER TABLE ops_job ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE ops_job DROP COLUMN cancel_requested;
