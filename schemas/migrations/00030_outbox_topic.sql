-- An outbox row names the topic it goes to: NULL is the events topic (the
-- relay's kafka.topic), anything else is published there as is. Projection
-- changes go to the compacted changes topic (kafka.changes_topic), where a
-- consumer keeps the last record of each key: a resource's records must
-- reach it in the order of the projection's writes, so a relay publishes a
-- change row only when no earlier row of its key and topic is still in the
-- outbox outside its own claim (held by another relay, or put back). The
-- index answers that question for change rows only; event rows, the bulk
-- of the outbox, pay nothing for it.

-- +goose Up
ALTER TABLE outbox ADD COLUMN topic text;
ALTER TABLE outbox_dead ADD COLUMN topic text;
CREATE INDEX outbox_topic_key ON outbox (message_key, id) WHERE topic IS NOT NULL;

-- +goose Down
DROP INDEX outbox_topic_key;
ALTER TABLE outbox_dead DROP COLUMN topic;
ALTER TABLE outbox DROP COLUMN topic;
