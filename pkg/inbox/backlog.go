package inbox

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Backlog is how many events have one unfinished status (pending,
// retrying, dead) and how long the oldest of them has waited.
type Backlog struct {
	Status string
	Count  int64
	// AgeSeconds is how long the oldest has waited, by the database's
	// clock: a pending event since it was (re-)published, a retrying one
	// since it was received; 0 for dead events and when there is none.
	AgeSeconds float64
}

// backlogSQL reads the partial index of each status only
// (webhook_inbox_pending, webhook_inbox_retry_due, webhook_inbox_dead): one
// equality on status per branch, so each branch's index is the only one
// that fits. A pending event waits since it was (re-)published: received,
// or re-enqueued by a retry, replay or requeue (next_attempt_at).
const backlogSQL = `
SELECT 'pending', count(*), coalesce(extract(epoch FROM now() - min(coalesce(next_attempt_at, received_at))), 0)::float8
FROM webhook_inbox WHERE status = 'pending'
UNION ALL
SELECT 'retrying', count(*), coalesce(extract(epoch FROM now() - min(received_at)), 0)::float8
FROM webhook_inbox WHERE status = 'retrying'
UNION ALL
SELECT 'dead', count(*), 0 FROM webhook_inbox WHERE status = 'dead'`

// CountBacklog reads the backlog of each unfinished status, for the gauges
// of every scrape: cheap on an inbox of millions, whatever its statistics.
func CountBacklog(ctx context.Context, pool *pgxpool.Pool) ([]Backlog, error) {
	rows, err := pool.Query(ctx, backlogSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Backlog, error) {
		var b Backlog
		err := row.Scan(&b.Status, &b.Count, &b.AgeSeconds)
		return b, err
	})
}
