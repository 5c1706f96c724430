package action

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// OpenCapped is how many actions of one kind and status are not sent yet,
// counted up to a cap: the console's overview, which must answer in the same
// time whatever the backlog (CountOpen counts exactly, for the metrics).
type OpenCapped struct {
	Kind   string
	Status string
	// Count is exact when Capped is false.
	Count  int64
	Capped bool
}

// openStatuses are the statuses in action_unsent.
var openStatuses = []string{StatusPending, StatusSending, StatusFailed, StatusAmbiguous, StatusDead}

// openCappedSQL reads action_unsent only: its kinds one probe each (a loose
// index scan; the kinds are few), then each (kind, status) up to $1 entries
// of it. GROUP BY over the index reads every open action: 100,000 of them
// when a receipt endpoint has been down for a day.
const openCappedSQL = `
WITH RECURSIVE kinds(kind) AS (
  SELECT min(kind) FROM action WHERE status <> 'sent'
  UNION ALL
  SELECT (SELECT min(a.kind) FROM action a WHERE a.status <> 'sent' AND a.kind > k.kind) FROM kinds k WHERE k.kind IS NOT NULL
)
SELECT k.kind, s.status, c.n FROM kinds k
CROSS JOIN unnest($2::text[]) s(status)
CROSS JOIN LATERAL (
  SELECT count(*) AS n FROM (
    SELECT 1 FROM action a WHERE a.status <> 'sent' AND a.kind = k.kind AND a.status = s.status LIMIT $1) x) c
WHERE k.kind IS NOT NULL AND c.n > 0
ORDER BY 1, 2`

// consolePlanSQL is set, for its transaction only, before openCappedSQL.
// With statistics the planner counts a (kind, status) by a sequential scan
// of the action table that stops at the cap: cheap when the pair is common,
// a walk of every action when it is rare. Without sequential and bitmap
// scans the index's range is the plan left, and the plan test checks it.
const consolePlanSQL = `SELECT set_config('enable_bitmapscan', 'off', $1), set_config('enable_seqscan', 'off', $1)`

// CountOpenCapped counts the actions not sent yet by kind and status, up to
// limit each (Capped when there are more).
func CountOpenCapped(ctx context.Context, pool *pgxpool.Pool, limit int64) ([]OpenCapped, error) {
	var out []OpenCapped
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, consolePlanSQL, true); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, openCappedSQL, limit+1, openStatuses)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (OpenCapped, error) {
			var o OpenCapped
			err := row.Scan(&o.Kind, &o.Status, &o.Count)
			if o.Count > limit {
				o.Count, o.Capped = limit, true
			}
			return o, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("count open actions: %w", err)
	}
	return out, nil
}
