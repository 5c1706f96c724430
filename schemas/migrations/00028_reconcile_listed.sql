-- A resource's state as a reconcile listing returned it, for the check
-- that names it: the Kafka record of the check carries identities only
-- (the resource's key and listed_seq), never a provider's object, so no
-- customer data lands in the topic, its retention or its replays. The
-- processor reads the row when it handles the check (a listing's state is
-- written as an observation of listed_at, ordered by seq like a fetch) and
-- deletes it, with every older one of the resource, in the transaction
-- that handles the check; `hookyard erase` deletes an account's rows.
--
-- seq is the listing's fetch start (projection_fetch_seq), read before its
-- page was asked for: with the resource it is the check's identity.

-- +goose Up
CREATE TABLE reconcile_listed (
    provider          text        NOT NULL,
    source_account    text        NOT NULL,
    environment       text        NOT NULL,
    resource_type     text        NOT NULL,
    resource_id       text        NOT NULL,
    seq               bigint      NOT NULL,
    listed_at         timestamptz NOT NULL,
    state             jsonb       NOT NULL,
    status            text        NOT NULL DEFAULT '',
    deleted           boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (provider, source_account, environment, resource_type, resource_id, seq)
);

-- +goose Down
DROP TABLE reconcile_listed;
