package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// enqueueSQL sends the inbox rows chosen by the "picked" CTE back down the
// outbox → Kafka path, on the same key and so the same partition as the
// original. %s is the picking query; it must lock with FOR UPDATE SKIP LOCKED.
const enqueueSQL = `
WITH picked AS (%s), upd AS (
    UPDATE webhook_inbox w SET status = 'pending', processed_at = NULL,
        -- for a pending row, next_attempt_at remembers when it was last re-published
        next_attempt_at = now(),
        -- a replay is an operator's fresh start: a whole retry window and
        -- attempt budget again, or a replayed dead event would die on its
        -- first failure
        attempts = CASE WHEN $1::text = 'replay' THEN 0 ELSE w.attempts END,
        first_failed_at = CASE WHEN $1::text = 'replay' THEN NULL ELSE w.first_failed_at END
    FROM picked p
    WHERE w.provider = p.provider AND w.source_account = p.source_account
      AND w.environment = p.environment AND w.event_id = p.event_id
      -- a purged event has nothing left to apply; it stays as it is
      AND ` + hasBodySQL + `
    RETURNING w.provider, w.source_account, w.environment, w.event_id, w.event_type, w.endpoint_id,
              CASE WHEN w.resource_id = '' THEN 'event' ELSE w.resource_type END AS rt,
              CASE WHEN w.resource_id = '' THEN w.event_id ELSE w.resource_id END AS rid,
              w.trace_parent
)
INSERT INTO outbox (message_key, message)
SELECT concat_ws('/', provider, source_account, environment, rt, rid),
       jsonb_build_object('kind', 'event', 'provider', provider, 'source_account', source_account,
           'environment', environment, 'resource_type', rt, 'resource_id', rid, 'event_id', event_id,
           'event_type', event_type, 'endpoint_id', endpoint_id, 'enqueued_at', now(), 'reason', $1::text)
           -- the intake's trace, for the relay to link this publication to;
           -- left out (not null) when the event was received untraced
           || CASE WHEN trace_parent IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('traceparent', trace_parent) END
FROM upd`

const dueSQL = `
SELECT provider, source_account, environment, event_id FROM webhook_inbox
WHERE status = 'retrying' AND next_attempt_at <= $2
ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED`

// EnqueueDue re-enqueues up to limit parked events whose next attempt is
// due. Safe to run from several processes at once.
func EnqueueDue(ctx context.Context, pool *pgxpool.Pool, now time.Time, limit int) (int64, error) {
	tag, err := probedExec(ctx, pool, fmt.Sprintf(enqueueSQL, dueSQL), "retry", now, limit)
	if err != nil {
		return 0, fmt.Errorf("enqueue due retries: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Why Replay replayed nothing, as errors; ErrNotFound when there is no such
// event.
var (
	// ErrPurged: the retention purge dropped the event's payload, so there
	// is nothing left to apply.
	ErrPurged = errors.New("event purged: the retention purge dropped its payload, nothing is left to replay")
	// ErrIgnored: the event is outside its endpoint's allow-list; it was
	// never processed and a replay does not start now.
	ErrIgnored = errors.New("event ignored: outside its endpoint's allow-list, never processed")
	// ErrBusy: another transaction held the row (a processor marking it, a
	// concurrent replay); try again.
	ErrBusy = errors.New("event busy: another transaction holds it; try again")
)

// skipErrs maps ReplayEvents' reasons to Replay's errors.
var skipErrs = map[string]error{SkipNotInInbox: ErrNotFound, SkipPurged: ErrPurged, SkipIgnored: ErrIgnored, SkipBusy: ErrBusy}

// Replay re-enqueues one event (dead, processed or parked). A replay is
// harmless: a snapshot older than the projection is recorded as stale, and a
// hint re-fetches the current state. When it replays nothing it says why:
// ErrNotFound, ErrPurged, ErrIgnored or ErrBusy (SkipOf names the reason as
// ReplayEvents does), so an operator is never left with a bare 0.
func Replay(ctx context.Context, pool *pgxpool.Pool, k Key) (int64, error) {
	n, skipped, err := ReplayEvents(ctx, pool, []Key{k})
	if err != nil {
		return 0, fmt.Errorf("replay event %s: %w", k.EventID, err)
	}
	if n == 1 {
		return 1, nil
	}
	return 0, fmt.Errorf("replay event %s: %w", k.EventID, skipErrs[skipped[k]])
}

// SkipOf is the reason (SkipNotInInbox, SkipPurged, SkipIgnored, SkipBusy)
// an error of Replay stands for, or "" for any other error.
func SkipOf(err error) string {
	for reason, e := range skipErrs {
		if errors.Is(err, e) {
			return reason
		}
	}
	return ""
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
	tag, err := probedExec(ctx, pool, fmt.Sprintf(enqueueSQL, replayResourceSQL), "replay", provider, account, env, rtype, rid, since)
	if err != nil {
		return 0, fmt.Errorf("replay resource %s: %w", rid, err)
	}
	return tag.RowsAffected(), nil
}

// messageKeySQL is the Kafka key of an inbox row's message, as intake and
// enqueueSQL write it (message.Resource.Key).
const messageKeySQL = `concat_ws('/', w.provider, w.source_account, w.environment,
    CASE WHEN w.resource_id = '' THEN 'event' ELSE w.resource_type END,
    CASE WHEN w.resource_id = '' THEN w.event_id ELSE w.resource_id END)`

// stuckSQL finds pending events whose latest publication left the outbox.
// A pending row's publication time is coalesce(next_attempt_at,
// received_at): intake and every re-publish set it in the statement that
// inserts the outbox row, whose created_at is the same now(). So when no
// outbox row is that old, this publication's row is gone: the relay deleted
// it in the transaction that saw the broker acknowledge the record (or moved
// it to outbox_dead, refused for good — those are left to the operator:
// publishing them again fails again). Both rows commit together, so one
// snapshot never sees the inbox row without its outbox row still there.
// A row waiting in the outbox is slow, never lost; one older outbox row (a
// backlog) makes every younger event wait too, which is what a backlog
// should do: no extra work while the system is behind.
const stuckSQL = `
SELECT w.provider, w.source_account, w.environment, w.event_id, coalesce(w.next_attempt_at, w.received_at),
       ` + messageKeySQL + `
FROM webhook_inbox w
WHERE w.status = 'pending' AND coalesce(w.next_attempt_at, w.received_at) < $1
  -- behind a backlog, the pending rows younger than the outbox's oldest
  -- row are not read at all: both bounds are webhook_inbox_pending's key
  -- the oldest outbox row by id, through the primary key (min(created_at)
  -- would read the whole outbox: it has no index on created_at, and a
  -- queue table should not pay for one). Ids and created_at follow each
  -- other up to the skew of concurrent inserts; within that skew an event
  -- may be published once more, which is harmless.
  AND coalesce(w.next_attempt_at, w.received_at) < coalesce((SELECT created_at FROM outbox ORDER BY id LIMIT 1), 'infinity')
  AND ` + hasBodySQL + `
  AND NOT EXISTS (SELECT 1 FROM outbox_dead d
                  WHERE d.created_at = coalesce(w.next_attempt_at, w.received_at) AND d.message_key = ` + messageKeySQL + `)
-- Condition and order are webhook_inbox_pending's key, which no other index
-- has: ordered by received_at, the planner may walk webhook_inbox_received
-- from the oldest row instead, through the whole processed history.
ORDER BY coalesce(w.next_attempt_at, w.received_at) LIMIT $2`

// Published is a pending event whose message left the outbox for Kafka.
type Published struct {
	Key Key
	// At is when this publication was enqueued (received_at, or the last
	// re-publish); a later re-publish changes it.
	At time.Time
	// MessageKey is the Kafka key its record was produced with.
	MessageKey string
}

// PublishedPending returns up to limit pending events, oldest first,
// enqueued before cutoff whose message has left the outbox: their record
// is in Kafka (or was lost on the way). Whether the consumer group has read
// past it is for the caller to decide; RequeueLost publishes the lost ones.
func PublishedPending(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, limit int) ([]Published, error) {
	var out []Published
	_, err := probed(ctx, pool, func(rows pgx.Rows) (err error) {
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Published, error) {
			var p Published
			err := row.Scan(&p.Key.Provider, &p.Key.SourceAccount, &p.Key.Environment, &p.Key.EventID, &p.At, &p.MessageKey)
			return p, err
		})
		return err
	}, stuckSQL, cutoff, limit)
	if err != nil {
		return nil, fmt.Errorf("find published pending events: %w", err)
	}
	return out, nil
}

// lostSQL picks the listed events only if they are still pending from the
// same publication: one processed, or re-published (by a retry, a replay)
// since it was judged lost, is left alone.
const lostSQL = `
SELECT w.provider, w.source_account, w.environment, w.event_id
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::text[])
     AS k(provider, source_account, environment, event_id, at, status)
JOIN webhook_inbox w ON w.provider = k.provider AND w.source_account = k.source_account
  AND w.environment = k.environment AND w.event_id = k.event_id
-- The status comes from the input ('pending' for every key), not a literal:
-- with "status = 'pending'" the planner can pick webhook_inbox_pending and
-- read every pending row for each key; compared with a column, only the
-- primary key fits.
WHERE w.status = k.status AND coalesce(w.next_attempt_at, w.received_at) = k.at
FOR UPDATE OF w SKIP LOCKED`

// RequeueLost re-publishes events whose Kafka record is lost (the caller
// saw the consumer group read past it while they stayed pending). Publishing
// again is harmless: the processor handles an event only while it is
// pending.
func RequeueLost(ctx context.Context, pool *pgxpool.Pool, lost []Published) (int64, error) {
	if len(lost) == 0 {
		return 0, nil
	}
	keys := make([]Key, len(lost))
	at := make([]time.Time, len(lost))
	pending := make([]string, len(lost))
	for i, l := range lost {
		keys[i], at[i], pending[i] = l.Key, l.At, StatusPending
	}
	p, a, e, id := keyColumns(keys)
	tag, err := probedExec(ctx, pool, fmt.Sprintf(enqueueSQL, lostSQL), "requeue", p, a, e, id, at, pending)
	if err != nil {
		return 0, fmt.Errorf("requeue %d lost events: %w", len(lost), err)
	}
	return tag.RowsAffected(), nil
}

// republishSQL picks a page of events pending since before $2. Each one it
// re-publishes gets a new publication time (now(), after $2), so the next
// page starts after it; one without a payload cannot be re-published and
// would otherwise be picked again and again.
const republishSQL = `
SELECT w.provider, w.source_account, w.environment, w.event_id FROM webhook_inbox w
WHERE w.status = 'pending' AND coalesce(w.next_attempt_at, w.received_at) < $2
  AND ` + hasBodySQL + `
ORDER BY w.received_at LIMIT $3 FOR UPDATE OF w SKIP LOCKED`

// RepublishPending re-publishes every event pending since before it
// started (by the database's clock, which stamps re-publications: a faster
// local clock would pick the rows it just re-published again, forever),
// batch rows per statement (each its own transaction, so the outbox relay
// starts on the first page while later ones are written), and returns how
// many it re-published. It is for a broker known to have lost everything
// (hookyard dev's embedded Kafka starts empty); it does not ask whether a
// record is lost.
func RepublishPending(ctx context.Context, pool *pgxpool.Pool, batch int) (int64, error) {
	if batch <= 0 {
		return 0, fmt.Errorf("republish pending events: batch must be positive, got %d", batch)
	}
	var before time.Time
	if err := pool.QueryRow(ctx, `SELECT now()`).Scan(&before); err != nil {
		return 0, fmt.Errorf("republish pending events: %w", err)
	}
	var total int64
	for {
		tag, err := probedExec(ctx, pool, fmt.Sprintf(enqueueSQL, republishSQL), "requeue", before, batch)
		if err != nil {
			return total, fmt.Errorf("republish pending events: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() == 0 {
			return total, nil
		}
	}
}
