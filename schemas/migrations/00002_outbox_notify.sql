-- Outbox inserts wake the relays (LISTEN hookyard_outbox); relays also poll,
-- so a lost notification only delays a row. One notification per statement,
-- and Postgres folds repeats within a transaction into one. The payload is
-- the outbox's schema, so relays of other schemas in the database ignore it.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hookyard_outbox', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- +goose Down
DROP TRIGGER outbox_notify ON outbox;
DROP FUNCTION outbox_notify();
