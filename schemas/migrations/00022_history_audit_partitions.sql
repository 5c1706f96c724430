-- projection_history and ops_audit grow with traffic and operations: they
-- become RANGE-partitioned on recorded_at, so that retention drops whole
-- partitions (retention.history_age, retention.audit_age) instead of
-- deleting rows. hookyard creates and drops the partitions (pkg/partition).
--
-- Online, on tables of any size, without a long lock:
-- 1. a unique index on (id, recorded_at), the partitioned table's primary
--    key, on the existing table. On a large existing table, create it
--    beforehand with CREATE UNIQUE INDEX CONCURRENTLY (same names and
--    definitions, see below); this migration then skips it. (Built
--    CONCURRENTLY here, every fresh schema's migration would wait for every
--    older transaction of the database; drop an INVALID one left by a
--    failed concurrent build first: IF NOT EXISTS would keep it.)
-- 2. a CHECK (recorded_at < cutover) is added NOT VALID (an instant
--    catalog change) and VALIDATEd, which scans under SHARE UPDATE
--    EXCLUSIVE: writers go on. cutover is two days ahead, midnight UTC, so
--    that writers keep inserting into the old table until the swap;
-- 3. one statement swaps: the table is renamed *_legacy, the partitioned
--    table takes its name and attaches it as the partition MINVALUE ..
--    cutover. The CHECK proves the range and the indexes match, so ATTACH
--    scans and builds nothing: the locks are held for milliseconds.
-- The steps run one by one (NO TRANSACTION): in one transaction the NOT
-- VALID constraint's ACCESS EXCLUSIVE lock would be held through the
-- validating scan. The id
--    sequence moves to the new table, so dropping the legacy partition
--    later does not drop it.
-- Partitions from cutover on are created by hookyard (every service at
-- start, the reconciler every round); none is DEFAULT.
--
-- reconcile_divergence stays unpartitioned: one lasting divergence is one
-- row, unique while open on (resource, kind, provider_says), and a unique
-- index of a partitioned table must contain the partition key, which would
-- split that uniqueness. It grows with divergences, not with traffic.

-- +goose NO TRANSACTION
-- +goose Up
CREATE UNIQUE INDEX IF NOT EXISTS projection_history_id_recorded ON projection_history (id, recorded_at);
CREATE UNIQUE INDEX IF NOT EXISTS ops_audit_id_recorded ON ops_audit (id, recorded_at);

-- +goose StatementBegin
DO $$
DECLARE cutover timestamptz := date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '2 days';
BEGIN
    EXECUTE format('ALTER TABLE projection_history ADD CONSTRAINT projection_history_before_partitions CHECK (recorded_at < %L) NOT VALID', cutover);
    EXECUTE format('ALTER TABLE ops_audit ADD CONSTRAINT ops_audit_before_partitions CHECK (recorded_at < %L) NOT VALID', cutover);
END $$;
-- +goose StatementEnd

ALTER TABLE projection_history VALIDATE CONSTRAINT projection_history_before_partitions;
ALTER TABLE ops_audit VALIDATE CONSTRAINT ops_audit_before_partitions;

-- +goose StatementBegin
DO $$
DECLARE cutover timestamptz := (regexp_match(pg_get_constraintdef((SELECT oid FROM pg_constraint
        WHERE conname = 'projection_history_before_partitions' AND conrelid = 'projection_history'::regclass)), '''([^'']*)'''))[1]::timestamptz;
BEGIN
    ALTER TABLE projection_history RENAME TO projection_history_legacy;
    -- the partitioned table's primary key (id, recorded_at) takes over, through
    -- the index built concurrently; a partition has one primary key only
    ALTER TABLE projection_history_legacy DROP CONSTRAINT projection_history_pkey;
    ALTER INDEX projection_history_resource RENAME TO projection_history_legacy_resource;
    ALTER INDEX projection_history_id_recorded RENAME TO projection_history_legacy_id_recorded;
    CREATE TABLE projection_history (LIKE projection_history_legacy INCLUDING DEFAULTS) PARTITION BY RANGE (recorded_at);
    ALTER TABLE projection_history ADD PRIMARY KEY (id, recorded_at);
    CREATE INDEX projection_history_resource ON projection_history (provider, source_account, environment, resource_type, resource_id, id);
    EXECUTE format('ALTER TABLE projection_history ATTACH PARTITION projection_history_legacy FOR VALUES FROM (MINVALUE) TO (%L)', cutover);
    ALTER SEQUENCE projection_history_id_seq OWNED BY projection_history.id;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE cutover timestamptz := (regexp_match(pg_get_constraintdef((SELECT oid FROM pg_constraint
        WHERE conname = 'ops_audit_before_partitions' AND conrelid = 'ops_audit'::regclass)), '''([^'']*)'''))[1]::timestamptz;
BEGIN
    ALTER TABLE ops_audit RENAME TO ops_audit_legacy;
    -- the partitioned table's primary key (id, recorded_at) takes over, through
    -- the index built concurrently; a partition has one primary key only
    ALTER TABLE ops_audit_legacy DROP CONSTRAINT ops_audit_pkey;
    ALTER INDEX ops_audit_recorded_at RENAME TO ops_audit_legacy_recorded_at;
    ALTER INDEX ops_audit_id_recorded RENAME TO ops_audit_legacy_id_recorded;
    CREATE TABLE ops_audit (LIKE ops_audit_legacy INCLUDING DEFAULTS) PARTITION BY RANGE (recorded_at);
    ALTER TABLE ops_audit ADD PRIMARY KEY (id, recorded_at);
    CREATE INDEX ops_audit_recorded_at ON ops_audit (recorded_at);
    EXECUTE format('ALTER TABLE ops_audit ATTACH PARTITION ops_audit_legacy FOR VALUES FROM (MINVALUE) TO (%L)', cutover);
    ALTER SEQUENCE ops_audit_id_seq OWNED BY ops_audit.id;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE projection_history DETACH PARTITION projection_history_legacy;
    ALTER SEQUENCE projection_history_id_seq OWNED BY projection_history_legacy.id;
    DROP TABLE projection_history;
    ALTER TABLE projection_history_legacy RENAME TO projection_history;
    ALTER INDEX projection_history_legacy_resource RENAME TO projection_history_resource;
    ALTER TABLE projection_history DROP CONSTRAINT projection_history_before_partitions;
    ALTER TABLE ops_audit DETACH PARTITION ops_audit_legacy;
    ALTER SEQUENCE ops_audit_id_seq OWNED BY ops_audit_legacy.id;
    DROP TABLE ops_audit;
    ALTER TABLE ops_audit_legacy RENAME TO ops_audit;
    ALTER INDEX ops_audit_legacy_recorded_at RENAME TO ops_audit_recorded_at;
    ALTER TABLE ops_audit DROP CONSTRAINT ops_audit_before_partitions;
END $$;
-- +goose StatementEnd
