package projection

import (
	"cmp"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ParkedListLimitDefault is the default of ParkedFilter.Limit.
const ParkedListLimitDefault = 100

// ParkedFilter selects parked projections; empty fields match everything.
type ParkedFilter struct {
	Provider      string
	SourceAccount string
	Environment   string
	// Limit is the most projections listed. Defaults to
	// ParkedListLimitDefault.
	Limit int
}

// ListParked lists projections parked with needs_reconcile (version gap,
// conflict, unordered, or marked by another writer), oldest parking first,
// with why and when the last check was sent: what waits for a check, and
// what a check could not resolve (a provider without an API client), which
// stays here until a newer version or an operator resolves it.
func ListParked(ctx context.Context, pool *pgxpool.Pool, f ParkedFilter) ([]Projection, error) {
	rows, err := pool.Query(ctx, `
SELECT provider, source_account, environment, resource_type, resource_id, provider_version, state, coalesce(status, ''), deleted,
       needs_reconcile, coalesce(needs_reconcile_reason, ''), parked_at, reconcile_checked_at, coalesce(source_event_id, ''),
       fence_generation, observed_at, updated_at
FROM subscription_projection
WHERE needs_reconcile AND ($1 = '' OR provider = $1) AND ($2 = '' OR source_account = $2) AND ($3 = '' OR environment = $3)
ORDER BY parked_at NULLS FIRST, updated_at LIMIT $4`, f.Provider, f.SourceAccount, f.Environment, cmp.Or(f.Limit, ParkedListLimitDefault))
	if err != nil {
		return nil, fmt.Errorf("list parked projections: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Projection, error) {
		var p Projection
		var state []byte
		err := row.Scan(&p.Resource.Provider, &p.Resource.SourceAccount, &p.Resource.Environment, &p.Resource.Type, &p.Resource.ID,
			&p.Version, &state, &p.Status, &p.Deleted, &p.NeedsReconcile, &p.NeedsReconcileReason, &p.ParkedAt,
			&p.ReconcileCheckedAt, &p.SourceEventID, &p.Generation, &p.ObservedAt, &p.UpdatedAt)
		p.State = state
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list parked projections: %w", err)
	}
	if out == nil {
		out = []Projection{}
	}
	return out, nil
}
