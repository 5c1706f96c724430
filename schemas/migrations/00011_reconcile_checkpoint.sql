-- The reconciler's memory between rounds.
--
-- reconcile_checkpoint: one row per source (an endpoint:
-- provider/account/environment) and listing (subscriptions, events,
-- deliveries). cursor is where an interrupted walk resumes (opaque to the
-- database); high_water is the newest provider time a complete walk saw,
-- from which the next walk starts (minus an overlap); last_complete_at is
-- set only when a walk reached its end, so a round stopped by a 429, an
-- outage or a restart is never recorded as complete.
--
-- reconcile_divergence: what a listing said against what the projection
-- said. One lasting divergence is one row (unique while unresolved on the
-- resource, the kind and what the provider says), counted once however many
-- rounds see it; resolved_at is set when a listing sees the resource in
-- sync again.
--
-- reconcile_redelivery: GitHub deliveries the reconciler asked GitHub to
-- redeliver, so one lost delivery is asked for once (again only after
-- asked_at is old), not once per overlapping round.

-- +goose Up
CREATE TABLE reconcile_checkpoint (
    source            text        NOT NULL,
    listing           text        NOT NULL,
    cursor            text,
    high_water        timestamptz,
    last_complete_at  timestamptz,
    last_error        text,
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, listing)
);

CREATE TABLE reconcile_divergence (
    id                bigserial   PRIMARY KEY,
    provider          text        NOT NULL,
    source_account    text        NOT NULL,
    environment       text        NOT NULL,
    resource_type     text        NOT NULL,
    resource_id       text        NOT NULL,
    kind              text        NOT NULL,
    projection_says   text,
    provider_says     text        NOT NULL,
    first_seen_at     timestamptz NOT NULL DEFAULT now(),
    last_seen_at      timestamptz NOT NULL DEFAULT now(),
    resolved_at       timestamptz
);
CREATE UNIQUE INDEX reconcile_divergence_open ON reconcile_divergence
    (provider, source_account, environment, resource_type, resource_id, kind, provider_says) WHERE resolved_at IS NULL;
CREATE INDEX reconcile_divergence_resource ON reconcile_divergence
    (provider, source_account, environment, resource_type, resource_id, first_seen_at);

CREATE TABLE reconcile_redelivery (
    source            text        NOT NULL,
    guid              text        NOT NULL,
    delivery_id       bigint      NOT NULL,
    asked_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, guid)
);

-- +goose Down
DROP TABLE reconcile_redelivery;
DROP TABLE reconcile_divergence;
DROP TABLE reconcile_checkpoint;
