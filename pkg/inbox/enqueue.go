package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// enqueueSQL sends the inbox rows chosen by the "picked" CTE back down the
// outbox → Kafka path, on the same key and so the same partition as the
// original. %s is the picking query; it must lock with FOR UPDATE SKIP LOCKED.
const enqueueSQL = `
WITH picked AS (%s), upd AS (
    UPDATE webhook_inbox w SET status = 'pending', processed_at = NULL,
        -- for a pending row, next_attempt_at remembers when it was last re-published
        next_attempt_at = now()
    FROM picked p
    WHERE w.provider = p.provider AND w.source_account = p.source_account
      AND w.environment = p.environment AND w.event_id = p.event_id
      -- a purged event has nothing left to apply; it stays as it is
      AND (w.payload IS NOT NULL OR w.raw_body IS NOT NULL)
    RETURNING w.provider, w.source_account, w.environment, w.event_id, w.event_type, w.endpoint_id,
              CASE WHEN w.resource_id = '' THEN 'event' ELSE w.resource_type END AS rt,
              CASE WHEN w.resource_id = '' THEN w.event_id ELSE w.resource_id END AS rid
)
INSERT INTO outbox (message_key, message)
SELECT concat_ws('/', provider, source_account, environment, rt, rid),
       jsonb_build_object('kind', 'event', 'provider', provider, 'source_account', source_account,
           'environment', environment, 'resource_type', rt, 'resource_id', rid, 'event_id', event_id,
           'event_type', event_type, 'endpoint_id', endpoint_id, 'enqueued_at', now(), 'reason', $1::text)
FROM upd`

const dueSQL = `
SELECT provider, source_account, environment, event_id FROM webhook_inbox
WHERE status = 'retrying' AND next_attempt_at <= $2
ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED`

// EnqueueDue re-enqueues up to limit parked events whose next attempt is
// due. Safe to run from several processes at once.
func EnqueueDue(ctx context.Context, pool *pgxpool.Pool, now time.Time, limit int) (int64, error) {
	tag, err := pool.Exec(ctx, fmt.Sprintf(enqueueSQL, dueSQL), "retry", now, limit)
	if err != nil {
		return 0, fmt.Errorf("enqueue due retries: %w", err)
	}
	return tag.RowsAffected(), nil
}

const replayOneSQL = `
SELECT provider, source_account, environment, event_id FROM webhook_inbox
WHERE provider = $2 AND source_account = $3 AND environment = $4 AND event_id = $5 AND status <> 'ignored'
FOR UPDATE SKIP LOCKED`

// Replay re-enqueues one event (dead, processed or parked). A replay is
// harmless: a snapshot older than the projection is recorded as stale, and a
// hint re-fetches the current state.
func Replay(ctx context.Context, pool *pgxpool.Pool, k Key) (int64, error) {
	tag, err := pool.Exec(ctx, fmt.Sprintf(enqueueSQL, replayOneSQL), "replay", k.Provider, k.SourceAccount, k.Environment, k.EventID)
	if err != nil {
		return 0, fmt.Errorf("replay event %s: %w", k.EventID, err)
	}
	return tag.RowsAffected(), nil
}

// ReplayDead re-enqueues up to limit dead events received since since,
// oldest first. It is ReplayDeadMatching with only Since and Limit.
func ReplayDead(ctx context.Context, pool *pgxpool.Pool, since time.Time, limit int) (int64, error) {
	return ReplayDeadMatching(ctx, pool, DeadFilter{Since: since, Limit: limit})
}

const replayResourceSQL = `
SELECT provider, source_account, environment, event_id FROM webhook_inbox
WHERE provider = $2 AND source_account = $3 AND environment = $4 AND resource_type = $5 AND resource_id = $6
  AND status <> 'ignored' AND received_at >= $7
FOR UPDATE SKIP LOCKED`

// ReplayResource re-enqueues every event of one resource received since since.
func ReplayResource(ctx context.Context, pool *pgxpool.Pool, provider, account, env, rtype, rid string, since time.Time) (int64, error) {
	tag, err := pool.Exec(ctx, fmt.Sprintf(enqueueSQL, replayResourceSQL), "replay", provider, account, env, rtype, rid, since)
	if err != nil {
		return 0, fmt.Errorf("replay resource %s: %w", rid, err)
	}
	return tag.RowsAffected(), nil
}

// stuckSQL picks pending events by when they were last published (received,
// or re-enqueued: next_attempt_at), longest waiting first. Condition and
// order are webhook_inbox_pending's key, which no other index has: ordered
// by received_at, the planner may walk webhook_inbox_received from the
// oldest row instead, through the whole processed history.
const stuckSQL = `
SELECT provider, source_account, environment, event_id FROM webhook_inbox
WHERE status = 'pending' AND coalesce(next_attempt_at, received_at) < $2
ORDER BY coalesce(next_attempt_at, received_at) LIMIT $3 FOR UPDATE SKIP LOCKED`

// RequeueStuck re-publishes up to limit events still pending since before
// cutoff: their message was lost on the way (an embedded broker that
// restarted, a topic's retention, an unclean leader election). Publishing
// again is harmless: the processor handles an event only while it is pending.
func RequeueStuck(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, limit int) (int64, error) {
	tag, err := pool.Exec(ctx, fmt.Sprintf(enqueueSQL, stuckSQL), "requeue", cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("requeue stuck events: %w", err)
	}
	return tag.RowsAffected(), nil
}
