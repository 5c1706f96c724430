package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listings a source can be walked by, as reconcile_checkpoint names them.
const (
	// ListingEvents is the provider's events list (Stripe GET /v1/events,
	// Chargebee GET /api/v2/events).
	ListingEvents = "events"
	// ListingDeliveries is a GitHub hook's deliveries.
	ListingDeliveries = "deliveries"
)

// listingOf names the resource listing of a resource type, e.g.
// "subscriptions".
func listingOf(resourceType string) string { return resourceType + "s" }

// Checkpoint is where a source's listing stands.
type Checkpoint struct {
	Source  string `json:"source"`
	Listing string `json:"listing"`
	// Cursor is where an interrupted walk resumes; empty when the last walk
	// completed (the next one starts from the beginning, or from HighWater).
	Cursor string `json:"cursor,omitempty"`
	// HighWater is the newest provider time a complete walk saw (events,
	// deliveries); the next walk starts there minus the overlap.
	HighWater *time.Time `json:"high_water,omitempty"`
	// LastCompleteAt is when a walk last reached its end.
	LastCompleteAt *time.Time `json:"last_complete_at,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

const loadCheckpointSQL = `
SELECT coalesce(cursor, ''), high_water, last_complete_at, coalesce(last_error, ''), updated_at
FROM reconcile_checkpoint WHERE source = $1 AND listing = $2`

// LoadCheckpoint reads a listing's checkpoint; a listing never walked has
// the zero one.
func LoadCheckpoint(ctx context.Context, pool *pgxpool.Pool, source, listing string) (Checkpoint, error) {
	cp := Checkpoint{Source: source, Listing: listing}
	err := pool.QueryRow(ctx, loadCheckpointSQL, source, listing).Scan(&cp.Cursor, &cp.HighWater, &cp.LastCompleteAt, &cp.LastError, &cp.UpdatedAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return cp, fmt.Errorf("load checkpoint %s %s: %w", source, listing, err)
	}
	return cp, nil
}

// progressSQL records a walk's position after a page, or where it stopped
// and why. It never touches last_complete_at: an interrupted walk is not a
// complete one.
const progressSQL = `
INSERT INTO reconcile_checkpoint (source, listing, cursor, last_error, updated_at)
VALUES ($1, $2, nullif($3, ''), nullif($4, ''), now())
ON CONFLICT (source, listing) DO UPDATE
SET cursor = EXCLUDED.cursor, last_error = EXCLUDED.last_error, updated_at = now()`

// completeSQL records a walk that reached its end: the cursor is reset, the
// high water only moves forward.
const completeSQL = `
INSERT INTO reconcile_checkpoint (source, listing, cursor, high_water, last_complete_at, last_error, updated_at)
VALUES ($1, $2, NULL, $3, now(), NULL, now())
ON CONFLICT (source, listing) DO UPDATE
SET cursor = NULL, last_error = NULL, last_complete_at = now(), updated_at = now(),
    high_water = CASE WHEN reconcile_checkpoint.high_water IS NULL THEN EXCLUDED.high_water
                      ELSE greatest(reconcile_checkpoint.high_water, EXCLUDED.high_water) END`

// saveProgress stores the cursor of a walk in progress, and the error that
// stopped it if any. The context of a round that is stopping may be over;
// the checkpoint is still written, briefly, so a restart resumes there.
func saveProgress(ctx context.Context, pool *pgxpool.Pool, source, listing, cursor string, walkErr error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	msg := ""
	if walkErr != nil {
		msg = walkErr.Error()
	}
	if _, err := pool.Exec(ctx, progressSQL, source, listing, cursor, msg); err != nil {
		return fmt.Errorf("save checkpoint %s %s: %w", source, listing, err)
	}
	return nil
}

func saveComplete(ctx context.Context, pool *pgxpool.Pool, source, listing string, highWater *time.Time) error {
	if _, err := pool.Exec(ctx, completeSQL, source, listing, highWater); err != nil {
		return fmt.Errorf("complete checkpoint %s %s: %w", source, listing, err)
	}
	return nil
}

// Checkpoints lists every checkpoint, for `hookyard reconcile` and tests.
func Checkpoints(ctx context.Context, pool *pgxpool.Pool) ([]Checkpoint, error) {
	rows, err := pool.Query(ctx, `SELECT source, listing, coalesce(cursor, ''), high_water, last_complete_at, coalesce(last_error, ''), updated_at
FROM reconcile_checkpoint ORDER BY source, listing`)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Checkpoint, error) {
		var cp Checkpoint
		err := r.Scan(&cp.Source, &cp.Listing, &cp.Cursor, &cp.HighWater, &cp.LastCompleteAt, &cp.LastError, &cp.UpdatedAt)
		return cp, err
	})
}
