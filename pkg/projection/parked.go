package projection

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/message"
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
FROM projection
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

// needsReconcileSQL parks projections whose event died. It leaves
// updated_at alone: the state did not change, only the doubt about it.
// A resource with no projection has nothing to park; the reconciler's
// listing finds it as missing.
const needsReconcileSQL = `
UPDATE projection p
SET needs_reconcile = true, needs_reconcile_reason = u.reason,
    parked_at = now(), reconcile_checked_at = NULL
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
     AS u(provider, source_account, environment, resource_type, resource_id, reason)
WHERE p.provider = u.provider AND p.source_account = u.source_account AND p.environment = u.environment
  AND p.resource_type = u.resource_type AND p.resource_id = u.resource_id AND NOT p.needs_reconcile`

// Parking is a projection to park and why.
type Parking struct {
	Resource message.Resource
	// Reason says which event died and how; it is cut to
	// maxParkingReason bytes.
	Reason string
}

// maxParkingReason bounds a reason built from an error's text.
const maxParkingReason = 1000

// QueueNeedsReconcile queues into b the parking of ps' projections, whose
// event died (a hint exhausted its retries, an event the database refused):
// the change never landed, so the projection may be wrong, and the
// reconciler checks it. One resource named twice in ps is parked with the
// first reason.
func QueueNeedsReconcile(b *pgx.Batch, ps []Parking) {
	if len(ps) == 0 {
		return
	}
	cols := make([][]string, 6)
	for _, p := range ps {
		r := p.Resource
		for i, v := range []string{r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID, cutValid(p.Reason, maxParkingReason)} {
			cols[i] = append(cols[i], v)
		}
	}
	b.Queue(needsReconcileSQL, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]).Exec(func(pgconn.CommandTag) error { return nil })
}

// cutValid cuts s to at most n bytes, on a rune boundary, and replaces
// what text cannot hold (invalid UTF-8, NUL), so a reason built from any
// error is storable.
func cutValid(s string, n int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
