-- An effect caused by a projection transition (effects.declare with `on`)
-- has no fact to derive its body from: the body is stored with the action
-- when it is recorded, and every attempt POSTs those bytes. A fact's effect
-- (a receipt) keeps body NULL and derives its body from its fact, as
-- before. A nullable column without a default is added without rewriting
-- the table.

-- +goose Up
ALTER TABLE action ADD COLUMN IF NOT EXISTS body text;

-- +goose Down
ALTER TABLE action DROP COLUMN IF EXISTS body;
