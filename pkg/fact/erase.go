package fact

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// eraseSQL empties the data of one account's facts (or of those about
// some of its resources). The row stays: its identity keeps a repeated
// event from recording the fact again, and explain still shows that the
// invoice was paid. Empty provider or environment match every one.
const eraseSQL = `
UPDATE fact SET data = '{}'::jsonb
WHERE ($1 = '' OR provider = $1) AND source_account = $2 AND ($3 = '' OR environment = $3)
  AND (cardinality($4::text[]) = 0 OR resource_id = ANY($4::text[]))
  AND data <> '{}'::jsonb`

// Erase empties, in tx, the data of the facts of account (of provider and
// environment, "" for any; of resourceIDs when some are given) for an
// erasure request, and says how many it emptied. It is the one write that
// changes a recorded fact.
func Erase(ctx context.Context, tx pgx.Tx, provider, account, env string, resourceIDs []string) (int64, error) {
	if account == "" {
		return 0, fmt.Errorf("erase facts: an account is required")
	}
	if resourceIDs == nil {
		resourceIDs = []string{}
	}
	tag, err := tx.Exec(ctx, eraseSQL, provider, account, env, resourceIDs)
	if err != nil {
		return 0, fmt.Errorf("erase facts of %s: %w", account, err)
	}
	return tag.RowsAffected(), nil
}
