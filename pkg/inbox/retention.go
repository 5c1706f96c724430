package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/partition"
)

// BodyTableName is the time-partitioned table of event bodies beside the
// ledger webhook_inbox.
const BodyTableName = "webhook_inbox_body"

// OutcomePurged is the outcome of a retrying event whose body went with its
// partition after retention.dead_payload_age: it is dead, its last error
// kept.
const OutcomePurged = "purged"

// BodyTable is webhook_inbox_body's partition rule: partitions interval
// wide, dropped once their range ended payloadAge ago (0 keeps them). Before
// a drop, the bodies of unfinished events are moved to the current
// partition: pending ones always, retrying and dead ones while received
// less than deadPayloadAge ago; older retrying and dead ones lose their
// body (identity, status and reason stay), as finished ones do.
func BodyTable(interval, payloadAge, deadPayloadAge time.Duration, now func() time.Time) partition.Table {
	return partition.Table{Name: BodyTableName, Interval: interval, Horizon: payloadAge,
		BeforeDrop: func(ctx context.Context, tx pgx.Tx, p partition.Partition) error {
			t := now()
			return keepUnfinishedBodies(ctx, tx, p, t, t.Add(-deadPayloadAge))
		}}
}

// rescueSQL moves the bodies of unfinished events out of the partition
// [$1, $2) into the partition of $3, and points their ledger rows there.
// The ledger rows are found through the partial indexes of unfinished
// statuses (one OR arm each), so a drop reads the few unfinished rows, not
// the partition's millions of finished ones.
const rescueSQL = `
WITH r AS (
    SELECT w.ctid, w.provider, w.source_account, w.environment, w.event_id, w.body_at FROM webhook_inbox w
    WHERE (w.status = 'pending'
        OR (w.status = 'retrying' AND w.received_at >= $4)
        OR (w.status = 'dead' AND w.received_at >= $4))
      AND w.body_at >= $1 AND w.body_at < $2
    FOR UPDATE OF w
), copied AS (
    INSERT INTO webhook_inbox_body (provider, source_account, environment, event_id, stored_at, body)
    SELECT r.provider, r.source_account, r.environment, r.event_id, $3, b.body
    FROM r CROSS JOIN LATERAL (
        -- one primary-key probe per row (LIMIT 1: never a hash of the partition)
        SELECT b.body FROM webhook_inbox_body b
        WHERE b.provider = r.provider AND b.source_account = r.source_account
          AND b.environment = r.environment AND b.event_id = r.event_id AND b.stored_at = r.body_at
        LIMIT 1) b
    ON CONFLICT DO NOTHING
)
-- by the ctids r locked (a TID scan)
UPDATE webhook_inbox w SET body_at = $3
WHERE w.ctid = ANY (ARRAY(SELECT ctid FROM r))`

// expireSQL marks what loses its body with the partition [$1, $2) among
// unfinished events: retrying and dead ones received before $3. A retrying
// one has nothing left to retry with: it becomes dead, outcome "purged",
// its last error kept.
const expireSQL = `
UPDATE webhook_inbox w SET body_at = NULL,
    status = 'dead', next_attempt_at = NULL,
    outcome = CASE WHEN w.status = 'retrying' THEN 'purged' ELSE w.outcome END,
    processed_at = coalesce(w.processed_at, now())
WHERE ((w.status = 'retrying' AND w.received_at < $3) OR (w.status = 'dead' AND w.received_at < $3))
  AND w.body_at >= $1 AND w.body_at < $2`

func keepUnfinishedBodies(ctx context.Context, tx pgx.Tx, p partition.Partition, now, deadCutoff time.Time) error {
	from := time.Time{}
	if p.From != nil {
		from = *p.From
	}
	if _, err := tx.Exec(ctx, rescueSQL, from, *p.To, now, deadCutoff); err != nil {
		return fmt.Errorf("keep bodies of unfinished events: %w", err)
	}
	if _, err := tx.Exec(ctx, expireSQL, from, *p.To, deadCutoff); err != nil {
		return fmt.Errorf("expire bodies of old dead events: %w", err)
	}
	return nil
}

// forgetSQL deletes a batch of ledger rows whose identities are past the
// horizon: finished ones received before $1, dead ones before $2, oldest
// first through webhook_inbox_received; a body still kept goes with its
// row (so no body outlives the identity that finds it, for an erasure).
// Pending and retrying rows are never forgotten.
const forgetSQL = `
WITH p AS (
    SELECT ctid FROM webhook_inbox
    -- a range with both bounds, not "received_at < $1" alone: without
    -- statistics the planner takes a one-sided bound to hold a third of the
    -- ledger and sorts a sequential scan of it; a range it takes as narrow,
    -- and walks webhook_inbox_received from the oldest row
    WHERE received_at >= '-infinity' AND received_at < $1
      AND (status IN ('processed', 'ignored') OR (status = 'dead' AND received_at < $2))
    ORDER BY received_at LIMIT $3 FOR UPDATE SKIP LOCKED
), d AS (
    -- by the ctids p locked (a TID scan): joined on the identity, the
    -- planner may hash the whole ledger instead
    DELETE FROM webhook_inbox w WHERE w.ctid = ANY (ARRAY(SELECT ctid FROM p))
    RETURNING w.provider, w.source_account, w.environment, w.event_id, w.body_at
), b AS (
    DELETE FROM webhook_inbox_body b USING d
    WHERE b.provider = d.provider AND b.source_account = d.source_account
      AND b.environment = d.environment AND b.event_id = d.event_id AND b.stored_at = d.body_at
)
SELECT count(*) FROM d`

// ForgetIdentities deletes, batch rows per statement, the ledger rows of
// finished events received before finishedBefore and of dead events
// received before deadBefore, then VACUUMs webhook_inbox when it deleted
// any, so retention leaves no dead tuples behind. The vacuum leaves the
// ledger's empty tail pages (TRUNCATE false, migration 00047): truncating
// them takes an ACCESS EXCLUSIVE lock that intake and the processor's marks
// wait behind, for pages new identities fill again at once. An event redelivered
// after its identity is forgotten is taken as new: that is why the horizon
// (retention.identity_age) is longer than any provider redelivers, and the
// processor's writes stay idempotent on their own (facts by their
// identity, actions by their stable key, versioned projections by version).
func ForgetIdentities(ctx context.Context, pool *pgxpool.Pool, finishedBefore, deadBefore time.Time, batch int) (int64, error) {
	if batch <= 0 {
		return 0, fmt.Errorf("forget identities: batch must be positive, got %d", batch)
	}
	var total int64
	for {
		var n int64
		if err := pool.QueryRow(ctx, forgetSQL, finishedBefore, deadBefore, batch).Scan(&n); err != nil {
			return total, fmt.Errorf("forget identities: %w", err)
		}
		total += n
		if n < int64(batch) {
			break
		}
	}
	if total > 0 {
		if _, err := pool.Exec(ctx, `VACUUM (TRUNCATE false) webhook_inbox`); err != nil {
			return total, fmt.Errorf("vacuum webhook_inbox after forgetting identities: %w", err)
		}
	}
	return total, nil
}
