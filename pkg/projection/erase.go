package projection

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Erased is what an erasure did to the tables of this package, in rows.
type Erased struct {
	// Projections whose state was emptied.
	Projections int64 `json:"projection"`
	// History entries whose detail went.
	History int64 `json:"projection_history"`
	// Divergences deleted.
	Divergences int64 `json:"reconcile_divergence"`
	// Listed states deleted.
	Listed int64 `json:"reconcile_listed"`
}

// eraseSQL is one statement for the four tables, so the erasure of one
// account cannot stop half-way between them. A projection keeps what
// ordering needs and nothing of the provider's object: identity, version,
// status, deleted, fence generation and fetch order stay, so a stale
// snapshot is still refused (a lower version is stale; another snapshot of
// the same version is a conflict and the emptied state stays), and an
// erased resource never moves backwards. History keeps its outcomes,
// versions and statuses; its detail (a provider's error may quote a body)
// goes. Divergences and listed states of the account are deleted.
const eraseSQL = `
WITH p AS (
    UPDATE projection SET state = '{}'::jsonb, updated_at = now()
    WHERE ($1 = '' OR provider = $1) AND source_account = $2 AND ($3 = '' OR environment = $3)
      AND (cardinality($4::text[]) = 0 OR resource_id = ANY($4::text[]))
      AND state <> '{}'::jsonb
    RETURNING 1
), h AS (
    UPDATE projection_history SET detail = NULL
    WHERE ($1 = '' OR provider = $1) AND source_account = $2 AND ($3 = '' OR environment = $3)
      AND (cardinality($4::text[]) = 0 OR resource_id = ANY($4::text[]))
      AND detail IS NOT NULL
    RETURNING 1
), d AS (
    DELETE FROM reconcile_divergence
    WHERE ($1 = '' OR provider = $1) AND source_account = $2 AND ($3 = '' OR environment = $3)
      AND (cardinality($4::text[]) = 0 OR resource_id = ANY($4::text[]))
    RETURNING 1
), l AS (
    DELETE FROM reconcile_listed
    WHERE ($1 = '' OR provider = $1) AND source_account = $2 AND ($3 = '' OR environment = $3)
      AND (cardinality($4::text[]) = 0 OR resource_id = ANY($4::text[]))
    RETURNING 1
)
SELECT (SELECT count(*) FROM p), (SELECT count(*) FROM h), (SELECT count(*) FROM d), (SELECT count(*) FROM l)`

// Erase applies an erasure to the projections of account (of provider and
// environment, "" for any; of resourceIDs when some are given), their
// history, divergences and listed states, in tx, and says what it did.
func Erase(ctx context.Context, tx pgx.Tx, provider, account, env string, resourceIDs []string) (Erased, error) {
	var e Erased
	if account == "" {
		return e, fmt.Errorf("erase projections: an account is required")
	}
	if resourceIDs == nil {
		resourceIDs = []string{}
	}
	if err := tx.QueryRow(ctx, eraseSQL, provider, account, env, resourceIDs).Scan(&e.Projections, &e.History, &e.Divergences, &e.Listed); err != nil {
		return e, fmt.Errorf("erase projections of %s: %w", account, err)
	}
	return e, nil
}
