-- Retention of subscriber deliveries (retention.delivery_age): a delivery
-- sent or skipped long ago is deleted, with its body, in bounded batches
-- walking this index from the oldest. It holds the settled deliveries only,
-- keyed by when they settled, so the walk's only sensible plan is this
-- index (whatever the statistics) and a pass reads what it deletes plus
-- the few rows the pass keeps (see action.ForgetDeliveries), never the
-- receipts or the open actions. The action table is not partitioned by
-- time: its primary key is the stable key every attempt and every re-read
-- of the changes topic finds (recorded once), and a partitioned table's
-- unique keys must hold the partition column.

-- +goose Up
CREATE INDEX IF NOT EXISTS action_delivery_done ON action (done_at)
    WHERE order_key IS NOT NULL AND status IN ('sent', 'skipped');

-- +goose Down
DROP INDEX IF EXISTS action_delivery_done;
