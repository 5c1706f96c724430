-- Bodies leave the ledger for time partitions.
--
-- webhook_inbox stays the ledger of event identities: unpartitioned, so its
-- primary key stays global and intake's ON CONFLICT keeps deciding repeats,
-- however bodies are partitioned. It gets body_at, the stored_at of its
-- body's row: readers join on the identity and stored_at = body_at, which
-- prunes the join to one partition at run time.
--
-- webhook_inbox_body holds each body once, as the bytes that were received
-- (the signature was checked over them; nothing in SQL reads inside a body
-- any more), RANGE-partitioned on stored_at. hookyard creates partitions
-- ahead and drops whole partitions behind the body horizon
-- (retention.payload_age): a drop leaves no dead tuples and costs the same
-- whatever it holds. There is no DEFAULT partition: a later partition whose
-- range overlapped rows in it could not be created without scanning it, and
-- intake without a partition fails loudly (5xx; the provider retries) rather
-- than piling rows into one that is never dropped. This migration creates
-- the first partition (its day and the next two); services create the
-- following ones at start and the reconciler every round.
--
-- Online: ADD COLUMN without a default rewrites nothing and the new table is
-- empty, so the migration holds its locks for milliseconds whatever the
-- inbox's size. Rows received before it keep their bodies in the legacy
-- columns payload and raw_body; readers take the body from either place
-- (see pkg/inbox), and the legacy purge still empties those columns. A
-- later migration drops them once no row uses them.

-- +goose Up
ALTER TABLE webhook_inbox ADD COLUMN IF NOT EXISTS body_at timestamptz;

CREATE TABLE webhook_inbox_body (
    provider        text        NOT NULL,
    source_account  text        NOT NULL,
    environment     text        NOT NULL,
    event_id        text        NOT NULL,
    stored_at       timestamptz NOT NULL,
    body            bytea       NOT NULL,
    PRIMARY KEY (provider, source_account, environment, event_id, stored_at)
) PARTITION BY RANGE (stored_at);

-- +goose StatementBegin
DO $$
DECLARE
    f timestamptz := date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    t timestamptz := f + interval '3 days';
BEGIN
    EXECUTE format('CREATE TABLE %I PARTITION OF webhook_inbox_body FOR VALUES FROM (%L) TO (%L)',
        'webhook_inbox_body_p' || to_char(f AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MI') || '_' || to_char(t AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MI'),
        f, t);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE webhook_inbox_body;
ALTER TABLE webhook_inbox DROP COLUMN IF EXISTS body_at;
