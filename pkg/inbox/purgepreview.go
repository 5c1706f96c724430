package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// PurgePreview is what a purge at a cutoff would touch.
type PurgePreview struct {
	Rows int64 `json:"rows"`
	// OldestReceivedAt and NewestReceivedAt bound the rows; nil when there
	// are none.
	OldestReceivedAt *time.Time `json:"oldest_received_at"`
	NewestReceivedAt *time.Time `json:"newest_received_at"`
}

// previewPurgeSQL selects what purgeSQL would, through the same partial
// index (webhook_inbox_purgeable): only rows still to purge are read.
const previewPurgeSQL = `
SELECT count(*), min(received_at), max(received_at) FROM webhook_inbox
WHERE status IN ('processed', 'ignored') AND received_at < $1 AND (payload IS NOT NULL OR raw_body IS NOT NULL)`

// PreviewPurge reports what PurgePayloads at cutoff would touch, changing
// nothing: an operator's dry run before a purge.
func PreviewPurge(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time) (PurgePreview, error) {
	var p PurgePreview
	if err := pool.QueryRow(ctx, previewPurgeSQL, cutoff).Scan(&p.Rows, &p.OldestReceivedAt, &p.NewestReceivedAt); err != nil {
		return p, fmt.Errorf("preview purge: %w", err)
	}
	return p, nil
}
