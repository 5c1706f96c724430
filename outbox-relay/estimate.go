package outboxrelay

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// BacklogBound is the outbox backlog as a page can afford to read it.
type BacklogBound struct {
	// Rows is exact when Capped is false.
	Rows   int64
	Capped bool
	// IDSpan is max(id) - min(id) + 1: at least Rows, an upper bound on
	// the rows waiting (ids of rows already published, or of inserts that
	// rolled back, fall inside it). 0 when the outbox is empty.
	IDSpan int64
	// AgeSeconds is the age of the oldest row (lowest id); 0 when empty.
	AgeSeconds float64
}

// backlogBoundSQL reads at most $1 entries of the primary key and its two
// ends: it costs the same on a million waiting rows as on ten (Backlog's
// count walks up to a million, fine for a scrape, too slow for a page).
const backlogBoundSQL = `
SELECT (SELECT count(*) FROM (SELECT 1 FROM outbox ORDER BY id LIMIT $1) o),
       coalesce((SELECT max(id) FROM outbox) - (SELECT min(id) FROM outbox) + 1, 0),
       coalesce((SELECT extract(epoch FROM now() - created_at)::float8 FROM outbox ORDER BY id LIMIT 1), 0)`

// BacklogBounded counts the outbox up to limit rows (Capped when there are
// more) with the span of its ids and the oldest row's age, for the console.
func BacklogBounded(ctx context.Context, pool *pgxpool.Pool, limit int64) (BacklogBound, error) {
	var b BacklogBound
	if err := pool.QueryRow(ctx, backlogBoundSQL, limit+1).Scan(&b.Rows, &b.IDSpan, &b.AgeSeconds); err != nil {
		return b, fmt.Errorf("read outbox backlog: %w", err)
	}
	if b.Rows > limit {
		b.Rows, b.Capped = limit, true
	}
	b.AgeSeconds = max(b.AgeSeconds, 0)
	return b, nil
}
