package inbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
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
