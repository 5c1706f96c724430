package action

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// forgetDeliveriesSQL deletes up to $2 subscriber deliveries (ordered
// actions) sent or skipped before $1, oldest first, bodies with them.
//
// A settled delivery is kept while a later delivery of its stream is
// unsettled (pending, in flight, failed, ambiguous, dead). The ordered
// claim itself needs no settled row (its probe reads action_order_open,
// the unsettled ones), but the feeder finds a change it reads again by its
// action's key: once deleted, a re-read of its record (the feeder's last
// uncommitted batch after a crash) records it anew, with a new order_seq,
// behind the later unsettled one, and it would be sent after it — an older
// state after a newer one. While its stream is in flight its history
// stays; the probe is one descent of action_order_open, every stream
// column in its index condition.
//
// The walk is action_delivery_done from the oldest, a range with both
// bounds (a one-sided bound, without statistics, is taken to hold a third
// of the table and may be read by a sequential scan and sorted); the rows
// the probe keeps are passed again by every pass, and they are as few as
// the settled deliveries older than the horizon in streams still in
// flight.
const forgetDeliveriesSQL = `
WITH p AS (
    SELECT a.ctid FROM action a
    WHERE a.order_key IS NOT NULL AND a.status IN ('sent', 'skipped')
      AND a.done_at >= '-infinity' AND a.done_at < $1
      AND NOT EXISTS (
          SELECT 1 FROM action l
          WHERE l.kind = a.kind AND l.provider = a.provider AND l.source_account = a.source_account
            AND l.environment = a.environment AND l.order_key = a.order_key AND l.order_seq > a.order_seq
            AND l.order_key IS NOT NULL AND l.status IN ('pending', 'sending', 'failed', 'ambiguous', 'dead')
          -- a correlated subplan, as in claimOrderedSQL: pulled up into an
          -- anti join it may be planned as a scan of every open row
          OFFSET 0)
    ORDER BY a.done_at LIMIT $2
    FOR UPDATE OF a SKIP LOCKED
)
-- by the ctids p locked (a TID scan): joined on the key, the planner may
-- hash the whole table instead
DELETE FROM action a WHERE a.ctid = ANY (ARRAY(SELECT ctid FROM p))`

// ForgetDeliveries deletes, batch rows per statement, the subscribers'
// deliveries (actions of an ordered kind) sent or skipped before before,
// except those a later unsettled delivery of the same stream keeps (see
// forgetDeliveriesSQL), and returns how many it deleted. It never deletes
// an unsettled action, nor any action of another kind (receipts, a
// transition's effects). Dead tuples are left to autovacuum: a pass
// deletes what settled in one pass interval, a small part of the table.
func ForgetDeliveries(ctx context.Context, pool *pgxpool.Pool, before time.Time, batch int) (int64, error) {
	if batch <= 0 {
		return 0, fmt.Errorf("forget deliveries: batch must be positive, got %d", batch)
	}
	var total int64
	for {
		tag, err := pool.Exec(ctx, forgetDeliveriesSQL, before, batch)
		if err != nil {
			return total, fmt.Errorf("forget deliveries: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}
