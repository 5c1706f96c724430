package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound: no inbox row with that identity.
var ErrNotFound = errors.New("event not found")

// Row is an inbox row as operators see it.
type Row struct {
	Provider      string     `json:"provider"`
	SourceAccount string     `json:"source_account"`
	Environment   string     `json:"environment"`
	EventID       string     `json:"event_id"`
	EndpointID    string     `json:"endpoint_id"`
	EventType     string     `json:"event_type"`
	ResourceType  string     `json:"resource_type"`
	ResourceID    string     `json:"resource_id"`
	Version       *int64     `json:"resource_version,omitempty"`
	Status        string     `json:"status"`
	Outcome       *string    `json:"outcome,omitempty"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	LastError     *string    `json:"last_error,omitempty"`
	// FirstFailedAt is when the current run of failures began: the event is
	// retried until processor.retry_window after it. Nil when the event has
	// not failed since it was received or last replayed.
	FirstFailedAt *time.Time      `json:"first_failed_at,omitempty"`
	ReceivedAt    time.Time       `json:"received_at"`
	ProcessedAt   *time.Time      `json:"processed_at,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

const rowColumns = `provider, source_account, environment, event_id, endpoint_id, event_type, resource_type, resource_id,
    resource_version, status, outcome, attempts, next_attempt_at, last_error, received_at, processed_at, first_failed_at`

func scanRow(row pgx.CollectableRow) (Row, error) {
	var r Row
	err := row.Scan(&r.Provider, &r.SourceAccount, &r.Environment, &r.EventID, &r.EndpointID, &r.EventType,
		&r.ResourceType, &r.ResourceID, &r.Version, &r.Status, &r.Outcome, &r.Attempts, &r.NextAttemptAt,
		&r.LastError, &r.ReceivedAt, &r.ProcessedAt, &r.FirstFailedAt)
	return r, err
}

// Get reads one event, with its payload when withPayload.
func Get(ctx context.Context, pool *pgxpool.Pool, k Key, withPayload bool) (Row, error) {
	rows, err := pool.Query(ctx, `SELECT `+rowColumns+` FROM webhook_inbox
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND event_id = $4`,
		k.Provider, k.SourceAccount, k.Environment, k.EventID)
	if err != nil {
		return Row{}, fmt.Errorf("read event %s: %w", k.EventID, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRow)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("read event %s: %w", k.EventID, err)
	}
	if withPayload {
		var p []byte
		if _, err := probed(ctx, pool, func(rows pgx.Rows) (err error) {
			p, err = pgx.CollectExactlyOneRow(rows, pgx.RowTo[[]byte])
			return err
		}, `SELECT `+bodySQL+` FROM webhook_inbox w
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND event_id = $4`,
			k.Provider, k.SourceAccount, k.Environment, k.EventID); err != nil {
			return r, fmt.Errorf("read event payload %s: %w", k.EventID, err)
		}
		// A body that is not JSON (a malformed delivery kept dead) is not
		// shown as JSON; it stays in the row for the processor's tools.
		if json.Valid(p) {
			r.Payload = p
		}
	}
	return r, nil
}

// List reads events with status (dead, retrying, …), oldest first.
func List(ctx context.Context, pool *pgxpool.Pool, status string, limit int) ([]Row, error) {
	rows, err := pool.Query(ctx, `SELECT `+rowColumns+` FROM webhook_inbox WHERE status = $1 ORDER BY received_at LIMIT $2`, status, limit)
	if err != nil {
		return nil, fmt.Errorf("list %s events: %w", status, err)
	}
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("list %s events: %w", status, err)
	}
	return out, nil
}

// ListResource reads a resource's events, newest first.
func ListResource(ctx context.Context, pool *pgxpool.Pool, provider, account, env, rtype, rid string, limit int) ([]Row, error) {
	rows, err := pool.Query(ctx, `SELECT `+rowColumns+` FROM webhook_inbox
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND resource_type = $4 AND resource_id = $5
ORDER BY received_at DESC LIMIT $6`, provider, account, env, rtype, rid, limit)
	if err != nil {
		return nil, fmt.Errorf("list resource events: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("list resource events: %w", err)
	}
	return out, nil
}

// unixTimeSQL reads the JSON value at expr as Unix seconds (milliseconds
// from 1e11 on, as explain reads them) and yields NULL for anything else:
// a string, an object, a negative number, microseconds, 1e300. A sender may
// put any value there, and to_timestamp on one out of range raises
// "timestamp out of range", which failed the whole purge statement, every
// round, because of one row. The range is checked as numeric, which holds
// any JSON number, before anything is converted.
func unixTimeSQL(expr string) string {
	n := "(" + expr + ")::numeric"
	return `CASE WHEN jsonb_typeof(` + expr + `) = 'number' THEN CASE
        WHEN ` + n + ` >= 0 AND ` + n + ` < 1e11 THEN to_timestamp(` + n + `::float8)
        WHEN ` + n + ` >= 1e11 AND ` + n + ` < 1e14 THEN to_timestamp(` + n + `::float8 / 1000) END END`
}

var purgeSQL = `
UPDATE webhook_inbox w SET payload = NULL, raw_body = NULL,
    -- keep the provider's time, which explain shows, before the payload goes
    occurred_at = coalesce(w.occurred_at, ` + unixTimeSQL("w.payload->'created'") + `, ` + unixTimeSQL("w.payload->'occurred_at'") + `)
FROM (SELECT provider, source_account, environment, event_id FROM webhook_inbox
      WHERE status IN ('processed', 'ignored') AND received_at < $1 AND (payload IS NOT NULL OR raw_body IS NOT NULL)
      ORDER BY received_at LIMIT $2 FOR UPDATE SKIP LOCKED) p
WHERE w.provider = p.provider AND w.source_account = p.source_account
  AND w.environment = p.environment AND w.event_id = p.event_id`

// PurgePayloads drops the payload and raw bytes of finished events (processed
// or ignored) received before cutoff, in chunks, keeping their identity rows
// so late repeats are still recognised, and their status and decision. The
// provider's event time moves from the payload to occurred_at. Pending,
// retrying, dead and parked events keep their payloads.
func PurgePayloads(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, chunk int) (int64, error) {
	if chunk <= 0 {
		// LIMIT 0 purges nothing, so the loop below would never end.
		return 0, fmt.Errorf("purge payloads: chunk must be positive, got %d", chunk)
	}
	var total int64
	for {
		n, err := PurgeChunk(ctx, pool, cutoff, chunk)
		total += n
		if err != nil || n < int64(chunk) {
			return total, err
		}
	}
}

// PurgeChunk is one statement of PurgePayloads: at most chunk events.
func PurgeChunk(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, chunk int) (int64, error) {
	tag, err := pool.Exec(ctx, purgeSQL, cutoff, chunk)
	if err != nil {
		return 0, fmt.Errorf("purge payloads: %w", err)
	}
	return tag.RowsAffected(), nil
}

// receivedSQL tells whether an event is in the inbox, by its primary key.
const receivedSQL = `
SELECT EXISTS (SELECT 1 FROM webhook_inbox WHERE provider = $1 AND source_account = $2 AND environment = $3 AND event_id = $4)`

// Received reports whether the inbox holds the event of k. The reconciler
// asks before it asks a provider to redeliver an event: the receiver may
// have stored it even though the provider saw no 2xx (a timeout after the
// commit).
func Received(ctx context.Context, pool *pgxpool.Pool, k Key) (bool, error) {
	var received bool
	err := pool.QueryRow(ctx, receivedSQL, k.Provider, k.SourceAccount, k.Environment, k.EventID).Scan(&received)
	return received, err
}
