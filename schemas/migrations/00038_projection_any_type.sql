-- Every resource type is projected now, not only subscriptions: the table
-- subscription_projection becomes projection. Its rows already carry
-- resource_type in the primary key, so only names change: the table, its
-- primary key and its parked partial index. Renames take a brief ACCESS
-- EXCLUSIVE lock and rewrite nothing.
--
-- subscription_projection stays as a view over projection (every type, the
-- same columns), so readers of the old name (dashboards, ad-hoc SQL, older
-- tools) keep working. It is a simple view, so Postgres can also write through
-- it; new code uses projection. A view's * is expanded when it is created: a
-- column added to projection later must re-create the view to appear in it.

-- +goose Up
ALTER TABLE subscription_projection RENAME TO projection;
ALTER INDEX subscription_projection_pkey RENAME TO projection_pkey;
ALTER INDEX IF EXISTS subscription_projection_parked RENAME TO projection_parked;
CREATE VIEW subscription_projection AS SELECT * FROM projection;

-- +goose Down
DROP VIEW IF EXISTS subscription_projection;
ALTER INDEX IF EXISTS projection_parked RENAME TO subscription_projection_parked;
ALTER INDEX projection_pkey RENAME TO subscription_projection_pkey;
ALTER TABLE projection RENAME TO subscription_projection;
