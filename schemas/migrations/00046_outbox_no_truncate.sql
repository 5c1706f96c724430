-- A vacuum of the outbox leaves its empty tail pages in place.
--
-- The outbox is a queue: its rows are deleted a moment after they are
-- inserted, so nearly every vacuum finds empty pages at the table's end and,
-- by default, truncates them. Truncation takes an ACCESS EXCLUSIVE lock on
-- the outbox: a vacuum waits up to 5 s to get it, and while it holds it
-- every intake statement (which inserts the event's outbox row) waits. The
-- pages given back are needed again a second later. With truncation off the
-- table keeps the few pages its backlog needs and a vacuum takes no lock
-- that intake or the relays wait for. The relay's own vacuum says
-- TRUNCATE false as well, for databases where this setting is changed back.
--
-- Online: the storage parameter takes a SHARE UPDATE EXCLUSIVE lock, which
-- inserts, claims and deletes do not wait for.

-- +goose Up
ALTER TABLE outbox SET (vacuum_truncate = false);

-- +goose Down
ALTER TABLE outbox RESET (vacuum_truncate);
