-- reconcile_redelivery follows each failed GitHub delivery the inbox does
-- not hold until it arrives or GitHub no longer redelivers it, whatever the
-- deliveries walk's window: GitHub never redelivers by itself, and the walk
-- starts at its high water minus an overlap, so a delivery whose
-- redelivery failed too has left the window long before it may be asked
-- again.
--
-- first_failed_at is the first failed delivery's time (GitHub redelivers
-- only deliveries of the last 3 days); delivery_id the newest failed
-- attempt, the one asked for; attempts how many redeliveries were asked;
-- last_asked_at when (NULL: due now). A row whose event arrived is deleted;
-- one GitHub refused, or past the 3 days, keeps given_up_at and the reason,
-- for `hookyard reconcile` to show.

-- +goose Up
ALTER TABLE reconcile_redelivery RENAME COLUMN asked_at TO last_asked_at;
ALTER TABLE reconcile_redelivery
    ALTER COLUMN last_asked_at DROP NOT NULL,
    ALTER COLUMN last_asked_at DROP DEFAULT,
    ADD COLUMN first_failed_at timestamptz,
    ADD COLUMN attempts        integer NOT NULL DEFAULT 0,
    ADD COLUMN given_up_at     timestamptz,
    ADD COLUMN reason          text;
UPDATE reconcile_redelivery SET first_failed_at = last_asked_at, attempts = 1;
ALTER TABLE reconcile_redelivery ALTER COLUMN first_failed_at SET NOT NULL;

-- +goose Down
ALTER TABLE reconcile_redelivery
    DROP COLUMN reason,
    DROP COLUMN given_up_at,
    DROP COLUMN attempts,
    DROP COLUMN first_failed_at;
UPDATE reconcile_redelivery SET last_asked_at = now() WHERE last_asked_at IS NULL;
ALTER TABLE reconcile_redelivery ALTER COLUMN last_asked_at SET DEFAULT now(), ALTER COLUMN last_asked_at SET NOT NULL;
ALTER TABLE reconcile_redelivery RENAME COLUMN last_asked_at TO asked_at;
