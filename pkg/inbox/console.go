package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The console's reads of the inbox. Each one reads a bounded number of index
// entries, whatever the inbox holds and whatever its statistics say: an
// operator's page must answer in the same time on a million rows as on a
// hundred, and a count of every pending event (150,000 rows of a backlog)
// costs more than the page may.

// consolePlanSQL is set, for its transaction only, before the console's
// walks of a status's index in its order (ORDER BY the index key, LIMIT n).
// Each has one plan that reads n entries, the index scan, and plans that
// read the whole status or the whole inbox. Without statistics (or with
// statistics taken while nothing waited) the planner estimates a status at
// a few hundred rows, so a LIMIT above that looks free and it takes a
// bitmap scan: every row of the status fetched, then sorted for the first
// n (600 ms for the first 2,000 of 150,000 pending events, against a few).
// With statistics that know the status is small it sorts a sequential scan
// of the inbox instead. With both off, the index scan is the plan left, and
// the plan tests check that it is the one taken, in every state of the
// statistics. They are off for these reads only: elsewhere they are the
// right plans.
const consolePlanSQL = `SELECT set_config('enable_bitmapscan', 'off', $1), set_config('enable_seqscan', 'off', $1)`

// consoleRead runs fn in a read-only transaction with consolePlanSQL set.
func consoleRead(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, consolePlanSQL, true); err != nil {
			return err
		}
		return fn(tx)
	})
}

// CappedBacklog is one unfinished status as the console's overview shows
// it: how many, counted up to a cap, and the one time its index answers for
// free.
type CappedBacklog struct {
	Status string
	// Count is exact when it is at most the cap; Capped says there are more.
	Count  int64
	Capped bool
	// First is the first entry of the status's index: for pending, when the
	// longest-waiting event was (re-)published; for retrying, the earliest
	// next attempt (in the past: overdue); for dead, the oldest dead
	// event's arrival. Nil when there is none.
	First *time.Time
}

// cappedBacklogSQL reads each status's partial index in its own order, at
// most $1 entries (webhook_inbox_pending, webhook_inbox_retry_due,
// webhook_inbox_dead): the ORDER BY is each index's key, so the index is the
// only plan that does not sort the whole status, and the LIMIT stops the
// walk at the cap. The first entry of that order is the status's time.
const cappedBacklogSQL = `
SELECT 'pending', count(*), min(k) FROM (
  SELECT coalesce(next_attempt_at, received_at) AS k FROM webhook_inbox WHERE status = 'pending'
  ORDER BY coalesce(next_attempt_at, received_at) LIMIT $1) p
UNION ALL
SELECT 'retrying', count(*), min(k) FROM (
  SELECT next_attempt_at AS k FROM webhook_inbox WHERE status = 'retrying'
  ORDER BY next_attempt_at LIMIT $1) r
UNION ALL
SELECT 'dead', count(*), min(k) FROM (
  SELECT received_at AS k FROM webhook_inbox WHERE status = 'dead'
  ORDER BY received_at LIMIT $1) d`

// CountBacklogCapped counts pending, retrying and dead events up to limit
// each (Capped when there are more) with each status's first time. The
// exact counts are the metrics' (CountBacklog, each scrape).
func CountBacklogCapped(ctx context.Context, pool *pgxpool.Pool, limit int64) ([]CappedBacklog, error) {
	var out []CappedBacklog
	err := consoleRead(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, cappedBacklogSQL, limit+1)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (CappedBacklog, error) {
			var b CappedBacklog
			err := row.Scan(&b.Status, &b.Count, &b.First)
			if b.Count > limit {
				b.Count, b.Capped = limit, true
			}
			return b, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("count backlog: %w", err)
	}
	return out, nil
}

// ErrNotRetrying: the event exists but is not retrying (it was re-enqueued
// meanwhile, or went dead), so "retry now" left it alone.
var ErrNotRetrying = errors.New("event is not retrying")

const retryNowSQL = `
SELECT provider, source_account, environment, event_id FROM webhook_inbox
WHERE provider = $2 AND source_account = $3 AND environment = $4 AND event_id = $5 AND status = 'retrying'
FOR UPDATE`

// RetryNow enqueues one retrying event's next attempt now instead of at
// next_attempt_at: the scheduler's own statement (EnqueueDue's, reason
// retry) for this one key, so the event keeps its attempts and its retry
// window; only the wait is skipped. It returns ErrNotFound when there is no
// such event and an error wrapping ErrNotRetrying (naming the status) when
// it is not retrying: the scheduler, or another operator, got there first
// (a concurrent retry waits on the row's lock, then finds it pending).
func RetryNow(ctx context.Context, pool *pgxpool.Pool, k Key) error {
	status, err := enqueueOne(ctx, pool, retryNowSQL, "retry", k)
	switch {
	case err != nil:
		return fmt.Errorf("retry event %s now: %w", k.EventID, err)
	case status == "":
		return nil
	case status == "retrying":
		// Still retrying, and the enqueue skipped it: its payload is gone.
		return fmt.Errorf("retry event %s now: %w", k.EventID, ErrPurged)
	}
	return fmt.Errorf("retry event %s now: %w (status %s)", k.EventID, ErrNotRetrying, status)
}
