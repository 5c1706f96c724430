package projection

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/message"
)

// Divergence is a difference the reconciler found between what the
// provider listed and what the projection said: one row per divergence,
// however many rounds saw it.
type Divergence struct {
	// Kind: missing, status, cancel_at_period_end, deleted, parked.
	Kind           string     `json:"kind"`
	ProjectionSaid *string    `json:"projection_said"`
	ProviderSaid   string     `json:"provider_said"`
	FirstSeenAt    time.Time  `json:"first_seen_at"`
	LastSeenAt     time.Time  `json:"last_seen_at"`
	ResolvedAt     *time.Time `json:"resolved_at,omitempty"`
}

const divergencesSQL = `
SELECT kind, projection_says, provider_says, first_seen_at, last_seen_at, resolved_at
FROM reconcile_divergence
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND resource_type = $4 AND resource_id = $5
ORDER BY first_seen_at DESC, id DESC LIMIT $6`

// Divergences reads up to limit of the divergences the reconciler recorded
// for r, newest first.
func Divergences(ctx context.Context, pool *pgxpool.Pool, r message.Resource, limit int) ([]Divergence, error) {
	rows, err := pool.Query(ctx, divergencesSQL, r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("read divergences: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Divergence, error) {
		var d Divergence
		err := row.Scan(&d.Kind, &d.ProjectionSaid, &d.ProviderSaid, &d.FirstSeenAt, &d.LastSeenAt, &d.ResolvedAt)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read divergences: %w", err)
	}
	return out, nil
}
