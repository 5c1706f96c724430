-- The outbox trigger notifies only for rows for the events topic (topic
-- NULL), and not in a transaction that said it will notify after its
-- commit (hookyard.outbox_notify = 'after_commit').
--
-- A transaction that notifies takes, at commit, a lock that Postgres holds
-- across every database until that commit is durable (async.c,
-- PreCommit_Notify: "Serialize writers by acquiring a special lock that we
-- hold till after commit"): notifying transactions commit one at a time,
-- each behind the previous one's WAL flush, where other commits share
-- flushes. A statement trigger fires even when its INSERT inserted nothing,
-- and every projection statement of the processor holds an INSERT into the
-- outbox (the change record): each processor transaction notified, and
-- intake's commits, which notified too, waited in line behind each other
-- and behind the processor's (with the change stream on, HTTP p99 482 ms
-- against 79 ms with it off, at 1,000 events/s). Now intake's statements
-- run with hookyard.outbox_notify = 'after_commit' and change records never
-- notify from their transaction: both services wake the relays after their
-- commit, from a statement that writes nothing and so holds that lock for a
-- moment only (package outbox). Replays, retries and checks still notify
-- from their transaction. Change records queued by operators (erase,
-- changes republish) are found by the relays' poll (poll_interval, 1 s) or
-- with the next notification.
--
-- A row trigger whose WHEN holds for those rows only: for intake's rows and
-- change records the condition is false, so nothing is queued and no
-- function runs; for a replay of many rows the function runs per row and
-- Postgres folds the repeated notifications of a transaction into one.
-- Online: the trigger is dropped and recreated in this
-- migration's transaction, so no insert commits between them without a
-- trigger; the lock taken on outbox (SHARE ROW EXCLUSIVE) is held for
-- milliseconds.

-- +goose Up
DROP TRIGGER outbox_notify ON outbox;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH ROW
    WHEN (NEW.topic IS NULL AND current_setting('hookyard.outbox_notify', true) IS DISTINCT FROM 'after_commit')
    EXECUTE FUNCTION outbox_notify();

-- +goose Down
DROP TRIGGER outbox_notify ON outbox;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
