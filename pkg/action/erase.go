package action

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErasedError is the last error of an action whose data was erased.
const ErasedError = "erased"

// eraseSQL is the actions' part of an erasure: an action not sent yet dies
// (its fact's data is gone, and a receipt sent now would differ from the
// attempts before it; a replay sends the emptied fact), and every last
// error of the account's actions goes (an answer's reason may quote what
// was sent). The key, status history and attempts stay. An action is one
// customer's when its fact (its subject, for the fact types actions are
// about) is about one of the resources.
const eraseSQL = `
UPDATE action a SET
    last_error = '` + ErasedError + `',
    status = CASE WHEN a.status IN ('sent', 'dead', 'skipped') THEN a.status ELSE 'dead' END,
    done_at = CASE WHEN a.status IN ('sent', 'dead', 'skipped') THEN a.done_at ELSE now() END
WHERE ($1 = '' OR a.provider = $1) AND a.source_account = $2 AND ($3 = '' OR a.environment = $3)
  AND (a.last_error IS DISTINCT FROM '` + ErasedError + `' AND (a.last_error IS NOT NULL OR a.status NOT IN ('sent', 'dead', 'skipped')))
  AND (cardinality($4::text[]) = 0 OR EXISTS (
      SELECT 1 FROM fact f
      WHERE f.provider = a.provider AND f.source_account = a.source_account AND f.environment = a.environment
        AND f.fact_id = a.subject_id AND f.resource_id = ANY($4::text[])))`

// eraseOrderedSQL is the erasure of a subscriber's deliveries: each
// carries its change record, the projection's state with the customer's
// identity, as its body. The body goes (sent ones too: nothing else of the
// change is kept here) and an unsent delivery dies, as any action; the key
// and attempts stay. A delivery is about the resource its order_key names
// ("<type>/<id>").
const eraseOrderedSQL = `
UPDATE action a SET
    body = NULL,
    last_error = '` + ErasedError + `',
    status = CASE WHEN a.status IN ('sent', 'dead', 'skipped') THEN a.status ELSE 'dead' END,
    done_at = CASE WHEN a.status IN ('sent', 'dead', 'skipped') THEN a.done_at ELSE now() END
WHERE a.order_key IS NOT NULL AND a.body IS NOT NULL
  AND ($1 = '' OR a.provider = $1) AND a.source_account = $2 AND ($3 = '' OR a.environment = $3)
  AND (cardinality($4::text[]) = 0 OR substr(a.order_key, strpos(a.order_key, '/') + 1) = ANY($4::text[]))`

// Erase applies an erasure to the actions of account (of provider and
// environment, "" for any; of resourceIDs when some are given), in tx, and
// says how many actions it changed (a subscriber's delivery may count
// twice): unsent ones are dead, last errors gone, subscribers' deliveries
// without their bodies.
func Erase(ctx context.Context, tx pgx.Tx, provider, account, env string, resourceIDs []string) (int64, error) {
	if account == "" {
		return 0, fmt.Errorf("erase actions: an account is required")
	}
	if resourceIDs == nil {
		resourceIDs = []string{}
	}
	tag, err := tx.Exec(ctx, eraseSQL, provider, account, env, resourceIDs)
	if err != nil {
		return 0, fmt.Errorf("erase actions of %s: %w", account, err)
	}
	ordered, err := tx.Exec(ctx, eraseOrderedSQL, provider, account, env, resourceIDs)
	if err != nil {
		return 0, fmt.Errorf("erase subscriber deliveries of %s: %w", account, err)
	}
	return tag.RowsAffected() + ordered.RowsAffected(), nil
}
