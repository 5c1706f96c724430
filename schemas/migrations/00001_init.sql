-- +goose Up
-- One row per event identity. A delivery is never an identity: repeated
-- deliveries of one event hit the primary key and create no work.
CREATE TABLE webhook_inbox (
    provider          text        NOT NULL,
    source_account    text        NOT NULL,
    environment       text        NOT NULL,
    event_id          text        NOT NULL,
    endpoint_id       text        NOT NULL,
    event_type        text        NOT NULL,
    resource_type     text        NOT NULL DEFAULT '',
    resource_id       text        NOT NULL DEFAULT '',
    resource_version  bigint,
    payload           jsonb,
    raw_body          bytea,
    received_at       timestamptz NOT NULL DEFAULT now(),
    -- pending → processed | ignored | retrying → dead
    status            text        NOT NULL DEFAULT 'pending',
    outcome           text,
    attempts          integer     NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz,
    last_error        text,
    processed_at      timestamptz,
    PRIMARY KEY (provider, source_account, environment, event_id)
);
CREATE INDEX webhook_inbox_retry_due ON webhook_inbox (next_attempt_at) WHERE status = 'retrying';
CREATE INDEX webhook_inbox_dead ON webhook_inbox (received_at) WHERE status = 'dead';
CREATE INDEX webhook_inbox_resource ON webhook_inbox (provider, source_account, environment, resource_type, resource_id, received_at);
CREATE INDEX webhook_inbox_received ON webhook_inbox (received_at);

-- Work to publish. Relays claim rows with FOR UPDATE SKIP LOCKED and delete
-- them in the transaction that saw the broker's acknowledgement.
CREATE TABLE outbox (
    id              bigserial   PRIMARY KEY,
    message_key     text        NOT NULL,
    message         jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- Current state of each resource. provider_version is NULL for providers
-- whose state is fetched (Stripe); deleted rows stay as tombstones.
CREATE TABLE subscription_projection (
    provider          text        NOT NULL,
    source_account    text        NOT NULL,
    environment       text        NOT NULL,
    resource_type     text        NOT NULL DEFAULT 'subscription',
    resource_id       text        NOT NULL,
    provider_version  bigint,
    state             jsonb       NOT NULL,
    status            text,
    deleted           boolean     NOT NULL DEFAULT false,
    needs_reconcile   boolean     NOT NULL DEFAULT false,
    source_event_id   text,
    fence_generation  bigint      NOT NULL,
    observed_at       timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, source_account, environment, resource_type, resource_id)
);

-- What happened to each resource and why: applied, stale, conflict, parked.
CREATE TABLE projection_history (
    id                bigserial   PRIMARY KEY,
    provider          text        NOT NULL,
    source_account    text        NOT NULL,
    environment       text        NOT NULL,
    resource_type     text        NOT NULL,
    resource_id       text        NOT NULL,
    event_id          text,
    outcome           text        NOT NULL,
    provider_version  bigint,
    status            text,
    fence_generation  bigint,
    detail            text,
    recorded_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX projection_history_resource ON projection_history (provider, source_account, environment, resource_type, resource_id, id);

-- Fencing: one row per topic partition; the generation grows on every
-- take-over. partition_count records the topic's size the fence was taken on.
CREATE TABLE partition_fence (
    topic             text        NOT NULL,
    partition         integer     NOT NULL,
    generation        bigint      NOT NULL,
    owner             text        NOT NULL,
    taken_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic, partition)
);
CREATE TABLE topic_fence (
    topic             text        PRIMARY KEY,
    partition_count   integer     NOT NULL,
    recorded_at       timestamptz NOT NULL DEFAULT now()
);

-- Facts have identities of their own (an invoice paid stays paid whatever
-- the subscription's state is).
CREATE TABLE fact (
    provider          text        NOT NULL,
    source_account    text        NOT NULL,
    environment       text        NOT NULL,
    fact_type         text        NOT NULL,
    fact_id           text        NOT NULL,
    resource_type     text        NOT NULL,
    resource_id       text        NOT NULL,
    event_id          text        NOT NULL,
    data              jsonb       NOT NULL,
    recorded_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, source_account, environment, fact_type, fact_id)
);

-- External effects, recorded before they are attempted under a stable key.
CREATE TABLE action (
    provider          text        NOT NULL,
    source_account    text        NOT NULL,
    environment       text        NOT NULL,
    subject_id        text        NOT NULL,
    kind              text        NOT NULL,
    status            text        NOT NULL DEFAULT 'pending',
    attempts          integer     NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz NOT NULL DEFAULT now(),
    last_error        text,
    event_id          text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    done_at           timestamptz,
    PRIMARY KEY (provider, source_account, environment, subject_id, kind)
);

-- +goose Down
DROP TABLE action;
DROP TABLE fact;
DROP TABLE topic_fence;
DROP TABLE partition_fence;
DROP TABLE projection_history;
DROP TABLE subscription_projection;
DROP TABLE outbox;
DROP TABLE webhook_inbox;
