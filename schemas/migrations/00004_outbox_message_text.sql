-- The outbox holds each Kafka message as the JSON text the relay publishes:
-- no jsonb parse on insert, no jsonb-to-text rendering on every claim (the
-- relay's largest cost per row). Query it with message::jsonb.

-- +goose Up
ALTER TABLE outbox ALTER COLUMN message TYPE text USING message::text;

-- +goose Down
ALTER TABLE outbox ALTER COLUMN message TYPE jsonb USING message::jsonb;
