-- A change delivered to an internal subscriber (changes.subscribers) is an
-- action whose order matters: a later change of a resource is not sent to
-- a subscriber before an earlier one is settled. order_key names the
-- ordered stream (the resource, within the action's kind and account);
-- order_seq is the action's place in it, drawn from action_order_seq when
-- the subscriber feeder records it, in the changes topic's order (one key
-- is one partition, read in offset order). Both stay NULL for every other
-- action: nullable columns without defaults are added without rewriting
-- the table.

-- +goose Up
ALTER TABLE action ADD COLUMN IF NOT EXISTS order_key text;
ALTER TABLE action ADD COLUMN IF NOT EXISTS order_seq bigint;
CREATE SEQUENCE IF NOT EXISTS action_order_seq;
-- The ordered claim asks, per due action, "is an earlier one of its stream
-- still unsettled?": this index holds only the unsettled ordered rows (the
-- status list is the claim's word for word), so the probe is one index
-- descent whatever the statistics, and the index stays as small as the
-- backlog. A dead action stays in it: it blocks its stream until it is
-- replayed (or skipped).
CREATE INDEX IF NOT EXISTS action_order_open ON action (kind, provider, source_account, environment, order_key, order_seq)
    WHERE order_key IS NOT NULL AND status IN ('pending', 'sending', 'failed', 'ambiguous', 'dead');

-- +goose Down
DROP INDEX IF EXISTS action_order_open;
DROP SEQUENCE IF EXISTS action_order_seq;
ALTER TABLE action DROP COLUMN IF EXISTS order_seq;
ALTER TABLE action DROP COLUMN IF EXISTS order_key;
