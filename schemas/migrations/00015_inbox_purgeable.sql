-- The payload purge (every reconciler round, and `hookyard purge`) looks for
-- finished events that still hold a payload, oldest first. Through
-- webhook_inbox_received it walked every row received before the cutoff,
-- the ones purged in earlier rounds included: a cost that grew with the
-- inbox, every round. This index holds only the rows the purge still has to
-- do; a row leaves it when its payload goes.
--
-- On a large existing inbox, create it beforehand with CREATE INDEX
-- CONCURRENTLY (same name and definition); this migration then skips it.
-- (Drop an INVALID one left by a failed concurrent build first: IF NOT
-- EXISTS would keep it.)

-- +goose Up
CREATE INDEX IF NOT EXISTS webhook_inbox_purgeable ON webhook_inbox (received_at)
    WHERE status IN ('processed', 'ignored') AND (payload IS NOT NULL OR raw_body IS NOT NULL);

-- +goose Down
DROP INDEX IF EXISTS webhook_inbox_purgeable;
