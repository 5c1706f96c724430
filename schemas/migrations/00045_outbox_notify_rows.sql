-- The outbox trigger notifies only for a statement that inserted rows.
--
-- A statement trigger fires even when its INSERT inserted nothing, and the
-- processor's projection statements hold an INSERT into the outbox (the
-- change record) that usually inserts nothing (changes off, a stale or
-- duplicate snapshot, a fetch that found what was stored). Each of them
-- then queued a notification, and a transaction that notifies takes, at
-- commit, a lock that Postgres holds across every database until that
-- commit is durable (async.c, PreCommit_Notify: "Serialize writers by
-- acquiring a special lock that we hold till after commit"). Every
-- processor batch thus committed one at a time, behind intake's commits,
-- instead of sharing their WAL flushes: the processor's write rate fell,
-- and intake's latency rose with it.
--
-- The transition table holds the rows the statement inserted; the trigger
-- looks at one of them at most. Online: the function is replaced and the
-- trigger recreated in this migration's transaction, so no insert commits
-- between them without a trigger; the lock taken on outbox (SHARE ROW
-- EXCLUSIVE) is held for milliseconds.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM outbox_added) THEN
        PERFORM pg_notify('hookyard_outbox', TG_TABLE_SCHEMA);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TRIGGER outbox_notify ON outbox;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    REFERENCING NEW TABLE AS outbox_added
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- +goose Down
DROP TRIGGER outbox_notify ON outbox;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hookyard_outbox', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
