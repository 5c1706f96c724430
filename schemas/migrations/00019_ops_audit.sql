-- Who read personal data and who changed state through the ops API or the
-- CLI: every payload read and every replay, purge, action replay and fence
-- resize is one row, written in the request that did it. Kept for
-- retention.audit_age (400 days), then deleted oldest first by the
-- reconciler's purge step and purge jobs, hence the index on recorded_at.

-- +goose Up
CREATE TABLE ops_audit (
    id          bigserial   PRIMARY KEY,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    -- the token's name (OPS_TOKEN, a scoped token's name) or cli:<OS user>
    actor       text        NOT NULL,
    action      text        NOT NULL,
    -- the identity or the filter the operation named
    target      jsonb       NOT NULL DEFAULT '{}',
    -- rows read, replayed or purged (a job: as known when it started)
    rows        bigint      NOT NULL DEFAULT 0
);
CREATE INDEX ops_audit_recorded_at ON ops_audit (recorded_at);

-- +goose Down
DROP TABLE ops_audit;
