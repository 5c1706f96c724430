-- Long ops operations (purges, resource and partition replays) run as jobs:
-- one row each with its progress and a cursor, worked in bounded steps by
-- the ops API. A job whose runner died (its lease ran out) is resumed from
-- its cursor by the next runner; every step is safe to run again.

-- +goose Up
CREATE TABLE ops_job (
    id           bigserial   PRIMARY KEY,
    kind         text        NOT NULL,
    params       jsonb       NOT NULL,
    status       text        NOT NULL DEFAULT 'running',
    cursor       jsonb,
    progress     jsonb       NOT NULL DEFAULT '{}',
    error        text,
    steps        integer     NOT NULL DEFAULT 0,
    runner       text        NOT NULL,
    lease_until  timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);
CREATE INDEX ops_job_running ON ops_job (lease_until) WHERE status = 'running';

-- +goose Down
DROP TABLE ops_job;
