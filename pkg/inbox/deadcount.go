package inbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/message"
)

// CountDead counts the dead events f selects, up to limit: what a replay by
// the same filter (with that limit) would touch. It reads the same rows as
// ListDead, through webhook_inbox_dead.
func CountDead(ctx context.Context, pool *pgxpool.Pool, f DeadFilter, limit int) (int64, error) {
	cond, args := f.where(1)
	// The filter's text ends in its ORDER BY and LIMIT; the count keeps
	// the limit (a replay never touches more) and needs no order.
	cond = strings.Replace(cond, "ORDER BY received_at ", "", 1)
	var n int64
	err := pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM webhook_inbox WHERE `+cond+`) d`,
		append(args, limit)...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count dead events: %w", err)
	}
	return n, nil
}

// findResourceSQL reads webhook_inbox_by_resource, whose leading column is
// resource_id: an id looked up across every provider, account and
// environment is one range of that index, whatever the inbox's size.
const findResourceSQL = `
SELECT DISTINCT provider, source_account, environment, resource_type FROM webhook_inbox
WHERE resource_id = $1 LIMIT $2`

// FindResource returns the resources (any provider, account, environment
// and type) that events were received for under the id, up to limit.
func FindResource(ctx context.Context, pool *pgxpool.Pool, id string, limit int) ([]message.Resource, error) {
	rows, err := pool.Query(ctx, findResourceSQL, id, limit)
	if err != nil {
		return nil, fmt.Errorf("find resource %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (message.Resource, error) {
		r := message.Resource{ID: id}
		err := row.Scan(&r.Provider, &r.SourceAccount, &r.Environment, &r.Type)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("find resource %s: %w", id, err)
	}
	return out, nil
}
