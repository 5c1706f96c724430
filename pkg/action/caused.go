package action

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// causedSQL reads the actions whose subject is an observation of one
// resource ("<type>/<id>@…": a transition's effect, a change's delivery to
// a subscriber), through action_observation_subject: the byte range of the
// prefix "<type>/<id>@" ($4 up to $5, the prefix with its "@" raised to
// "A"), in the index's collation. A resource id may hold "@": the
// observation is what follows the prefix without another "@", so the
// subjects of resource "x@y" are not those of resource "x".
const causedSQL = `
SELECT ` + actionColumns + ` FROM action
WHERE provider = $1 AND source_account = $2 AND environment = $3
  AND strpos(subject_id, '@') > 0
  AND subject_id COLLATE "C" >= $4 AND subject_id COLLATE "C" < $5
  AND strpos(substr(subject_id, length($4) + 1), '@') = 0
ORDER BY created_at DESC LIMIT $6`

// CausedBy reads up to limit actions a resource's observations caused,
// newest first: the effects of its transitions (effects.declare with
// `on`) and the deliveries of its changes to subscribers, whatever their
// status.
func CausedBy(ctx context.Context, pool *pgxpool.Pool, provider, account, environment, typ, id string, limit int) ([]Action, error) {
	prefix := typ + "/" + id + "@"
	upper := typ + "/" + id + "A"
	rows, err := pool.Query(ctx, causedSQL, provider, account, environment, prefix, upper, limitOr(limit, ListLimitDefault))
	if err != nil {
		return nil, fmt.Errorf("read actions caused by %s %s: %w", typ, id, err)
	}
	out, err := pgx.CollectRows(rows, scanAction)
	if err != nil {
		return nil, fmt.Errorf("read actions caused by %s %s: %w", typ, id, err)
	}
	return out, nil
}
