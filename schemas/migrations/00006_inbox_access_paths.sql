-- Every statement the pipeline runs per event or per round must have one
-- index that fits it and no other, because on a table without statistics (a
-- fresh database, before autovacuum's first ANALYZE) every index built on
-- the empty table says it holds 0 rows, and after an ANALYZE taken while
-- nothing was pending every partial index on unfinished rows says the same:
-- the planner then sees ties, and the loser of a tie reads a share of the
-- inbox that grows with it. Checked by the TestHotStatementsUseTheirIndex...
-- tests, on 100k un-analyzed rows and after ANALYZE.
--
-- 1. webhook_inbox_resource began with (provider, source_account,
--    environment), the primary key's own leading columns: the processor's
--    lookups by event probed it with three columns and filtered event_id,
--    reading every row of the account for each key (40 keys took 10 s at
--    54k rows). webhook_inbox_by_resource begins with resource_id, so only
--    the primary key matches a lookup by event; queries by resource name all
--    five columns and still use it, newest first.
-- 2. webhook_inbox_unfinished (status, received_at) held pending and
--    retrying rows, so it matched both the retry scan (status = 'retrying',
--    meant for webhook_inbox_retry_due) and the stuck-event scan, which with
--    statistics walked webhook_inbox_received from the oldest row instead,
--    through the whole processed history. webhook_inbox_pending holds pending
--    rows only, keyed by when each was last published: the stuck scan's
--    condition and order, which no other index provides. Each unfinished
--    status now has one partial index (pending, retrying, dead).
--
-- On a large existing inbox, create the new indexes beforehand with CREATE
-- INDEX CONCURRENTLY (same names and definitions); this migration then skips
-- them. (Drop an INVALID one left by a failed concurrent build first: IF NOT
-- EXISTS would keep it.)

-- +goose Up
CREATE INDEX IF NOT EXISTS webhook_inbox_by_resource
    ON webhook_inbox (resource_id, resource_type, provider, source_account, environment, received_at);
DROP INDEX IF EXISTS webhook_inbox_resource;
CREATE INDEX IF NOT EXISTS webhook_inbox_pending
    ON webhook_inbox ((coalesce(next_attempt_at, received_at))) WHERE status = 'pending';
DROP INDEX IF EXISTS webhook_inbox_unfinished;

-- +goose Down
CREATE INDEX IF NOT EXISTS webhook_inbox_unfinished ON webhook_inbox (status, received_at)
    WHERE status IN ('pending', 'retrying');
DROP INDEX IF EXISTS webhook_inbox_pending;
CREATE INDEX IF NOT EXISTS webhook_inbox_resource
    ON webhook_inbox (provider, source_account, environment, resource_type, resource_id, received_at);
DROP INDEX IF EXISTS webhook_inbox_by_resource;
