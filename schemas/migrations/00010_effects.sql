-- The effects sender (package effects) claims due actions, sends them with
-- no transaction open, and records the outcome. Statuses:
--   pending → sending → sent | failed | ambiguous | dead
--   failed | ambiguous → sending (again, same key) ; dead → pending (replay)
-- While an action is 'sending', next_attempt_at is the end of its sender's
-- lease: once it passed, the sender is taken for dead and the action is
-- claimed again (with the same key) by the next sender.

-- +goose Up
-- claimed_by: the sender that made the latest attempt.
-- attempts_at_replay: attempts when an operator last replayed the action;
-- the attempt budget (effects.max_attempts) counts from there.
ALTER TABLE action ADD COLUMN IF NOT EXISTS claimed_by text;
ALTER TABLE action ADD COLUMN IF NOT EXISTS attempts_at_replay integer NOT NULL DEFAULT 0;
-- 'sent' is the final status; no release wrote 'done', but a row set by
-- hand would otherwise be claimed and sent.
UPDATE action SET status = 'sent' WHERE status = 'done';

-- The claim's index: a kind's due actions in next_attempt_at order. It
-- holds unfinished rows only, so it stays as small as the backlog, and it
-- serves the claim's every condition and its order, so the claim's plan
-- never depends on statistics (a fresh database has none).
CREATE INDEX IF NOT EXISTS action_due ON action (kind, next_attempt_at)
    WHERE status IN ('pending', 'sending', 'failed', 'ambiguous');
-- The gauges (hookyard_actions_open) and the dead list read this one.
CREATE INDEX IF NOT EXISTS action_unsent ON action (kind, status) WHERE status <> 'sent';
DROP INDEX IF EXISTS action_open;
-- explain finds the invoices (and their receipts) of a subscription. It
-- leads with resource_id so that no lookup of a fact by its own key (the
-- sender's) can take it for a prefix of the primary key: with
-- (provider, source_account, environment) first, the planner may pick it
-- on a table without statistics and read every fact of the account.
CREATE INDEX IF NOT EXISTS fact_resource ON fact (resource_id, resource_type, provider, source_account, environment);

-- +goose Down
DROP INDEX IF EXISTS fact_resource;
CREATE INDEX IF NOT EXISTS action_open ON action (kind, status) WHERE status <> 'done';
DROP INDEX IF EXISTS action_unsent;
DROP INDEX IF EXISTS action_due;
UPDATE action SET status = 'done' WHERE status = 'sent';
ALTER TABLE action DROP COLUMN IF EXISTS attempts_at_replay;
ALTER TABLE action DROP COLUMN IF EXISTS claimed_by;
