package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/message"
)

// Arrival is an event as a resource's timeline shows it: when it arrived,
// the provider's own time of it, and where it stands now.
type Arrival struct {
	EventID, EventType, Status string
	Outcome, LastError         *string
	Version                    *int64
	Attempts                   int
	NextAttemptAt              *time.Time
	ReceivedAt                 time.Time
	// OccurredAt is the provider's time, filled at intake.
	OccurredAt *time.Time
	// For rows older than occurred_at, the payload's time fields while it
	// is kept (JSON, nil when absent): Stripe "created", Chargebee
	// "occurred_at", Standard Webhooks "timestamp".
	Created, PayloadOccurredAt, Timestamp []byte
}

// arrivalsSQL reads the resource's latest events through
// webhook_inbox_by_resource. The provider's time comes from occurred_at
// (filled at intake), else, for older rows, from the payload while it is
// kept: Stripe "created", Chargebee "occurred_at", Standard Webhooks
// "timestamp".
const arrivalsSQL = `
SELECT event_id, event_type, status, outcome, last_error, resource_version, attempts, next_attempt_at,
       received_at, occurred_at,
       CASE WHEN occurred_at IS NULL THEN payload->'created' END,
       CASE WHEN occurred_at IS NULL THEN payload->'occurred_at' END,
       CASE WHEN occurred_at IS NULL THEN payload->'timestamp' END
FROM webhook_inbox
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND resource_type = $4 AND resource_id = $5
ORDER BY received_at DESC LIMIT $6`

// Arrivals reads up to limit of r's latest events, newest first.
func Arrivals(ctx context.Context, pool *pgxpool.Pool, r message.Resource, limit int) ([]Arrival, error) {
	rows, err := pool.Query(ctx, arrivalsSQL, r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Arrival, error) {
		var a Arrival
		err := row.Scan(&a.EventID, &a.EventType, &a.Status, &a.Outcome, &a.LastError, &a.Version, &a.Attempts, &a.NextAttemptAt,
			&a.ReceivedAt, &a.OccurredAt, &a.Created, &a.PayloadOccurredAt, &a.Timestamp)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return out, nil
}
