package inbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/message"
)

// CountDead counts the dead events f selects, up to limit: what a replay by
// the same filter (with that limit) would touch. It reads the same rows as
// ListDead, through webhook_inbox_dead.
func CountDead(ctx context.Context, pool *pgxpool.Pool, f DeadFilter, limit int) (int64, error) {
	sql, args := f.countSQL(limit)
	var n int64
	err := pool.QueryRow(ctx, sql, args...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count dead events: %w", err)
	}
	return n, nil
}

// countDeadSQL reads webhook_inbox_dead only. The filters apply above an
// OFFSET 0 fence: pushed down, they let a planner without statistics AND
// the dead index with the primary key's range of the provider (every row
// of an account, a cost that grows with the inbox). Below the fence the
// only condition is the dead index's own.
const countDeadSQL = `
SELECT count(*) FROM (
  SELECT 1 FROM (
    SELECT provider, source_account, environment, event_type, resource_type, resource_id
    FROM webhook_inbox WHERE status = 'dead' AND received_at >= $7 OFFSET 0) d
  WHERE ($1::text = '' OR d.provider = $1) AND ($2::text = '' OR d.source_account = $2)
    AND ($3::text = '' OR d.environment = $3) AND ($4::text = '' OR d.event_type = $4)
    AND ($5::text = '' OR d.resource_type = $5) AND ($6::text = '' OR d.resource_id = $6)
  LIMIT $8) c`

// countSQL is CountDead's statement and arguments; the count stops at
// limit (a replay never touches more).
func (f DeadFilter) countSQL(limit int) (string, []any) {
	return countDeadSQL, []any{f.Provider, f.SourceAccount, f.Environment, f.EventType, f.ResourceType, f.ResourceID, f.Since, limit}
}

// findResourceSQL reads webhook_inbox_by_resource, whose leading column is
// resource_id: an id looked up across every provider, account and
// environment is one range of that index, whatever the inbox's size. The
// DISTINCT sits above an OFFSET 0 fence: with DISTINCT and LIMIT on one
// level, a planner without statistics walked the primary key in its order
// (every row of the inbox, 700 ms at a million rows) to emit the groups
// sorted. The inner LIMIT bounds a resource of very many events.
const findResourceSQL = `
SELECT DISTINCT provider, source_account, environment, resource_type FROM (
  SELECT provider, source_account, environment, resource_type FROM webhook_inbox
  WHERE resource_id = $1 LIMIT 10000 OFFSET 0) r
LIMIT $2`

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
