package projection

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// countParkedSQL reads projection_parked, the partial index of
// parked projections only: the count costs what is parked, not the table.
const countParkedSQL = `SELECT count(*) FROM projection WHERE needs_reconcile`

// CountParked counts the projections parked for reconciliation.
func CountParked(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, countParkedSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("count parked projections: %w", err)
	}
	return n, nil
}

// countDivergencesSQL reads reconcile_divergence_seen from since on.
const countDivergencesSQL = `SELECT count(*) FROM reconcile_divergence WHERE last_seen_at >= $1`

// CountDivergencesSince counts the divergences the reconciler saw at or
// after since (first seen then, or seen again).
func CountDivergencesSince(ctx context.Context, pool *pgxpool.Pool, since time.Time) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, countDivergencesSQL, since).Scan(&n); err != nil {
		return 0, fmt.Errorf("count divergences: %w", err)
	}
	return n, nil
}
