package outboxrelay

import (
	"context"
	"log/slog"
	"time"
)

// The outbox is a queue: every row is inserted once and deleted once, and a
// claim walks the primary key from its lowest id, through the index entries
// of rows already deleted until a vacuum removes them. Autovacuum looks at a
// table about once a minute at best, and not at all while its workers are
// busy elsewhere (a time-partitioned database gives them a new table to
// analyze every interval, a large table one takes minutes): at 4,000 rows a
// second the outbox held 65,000 dead rows and no vacuum after a minute, and
// each claim read thousands of pages to find a few hundred rows. So the
// relay vacuums the outbox itself when its dead rows pass a threshold:
// VACUUM of a queue's few live rows and its dead ones takes milliseconds and,
// without truncation, takes no lock that writers or claims wait for.

// vacuumStatsSQL reads the outbox's dead rows (as the statistics collector
// last counted them) and whether this role may vacuum it (owner or
// superuser; any other role's VACUUM only warns and does nothing). It asks
// for the one table's counter: the pg_stat_user_tables view computes every
// table's row, and a partitioned database has hundreds.
const vacuumStatsSQL = `
SELECT pg_stat_get_dead_tuples(c.oid),
       pg_has_role(current_user, c.relowner, 'USAGE') OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
FROM pg_class c WHERE c.oid = 'outbox'::regclass`

// vacuumLoop checks the outbox's dead rows every VacuumCheckInterval and
// vacuums it when they reach VacuumDeadRows, until ctx ends. It stops for
// good (and says so) when this role may not vacuum the outbox.
func (r *Relay) vacuumLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.VacuumCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !r.vacuumIfDead(ctx) {
			return
		}
	}
}

// vacuumIfDead vacuums the outbox when its dead rows reached the threshold;
// false means it never will (the role may not).
func (r *Relay) vacuumIfDead(ctx context.Context) bool {
	var dead int64
	var may bool
	if err := r.pool.QueryRow(ctx, vacuumStatsSQL).Scan(&dead, &may); err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "read the outbox's dead rows", slog.String("error", err.Error()))
		}
		return true
	}
	if !may {
		r.log.InfoContext(ctx, "this role does not own the outbox and may not vacuum it; autovacuum alone removes its dead rows (tune it for a queue table, see the operations manual)")
		return false
	}
	if dead < int64(r.cfg.VacuumDeadRows) {
		return true
	}
	start := time.Now()
	// SKIP_LOCKED: another relay's (or autovacuum's) vacuum of it is
	// already running; this round has nothing to add. TRUNCATE false: the
	// empty pages at the queue's end are refilled a moment later, and
	// giving them back takes an ACCESS EXCLUSIVE lock that intake's inserts
	// wait behind (migration 00046 says the same for autovacuum).
	if _, err := r.pool.Exec(ctx, `VACUUM (SKIP_LOCKED, TRUNCATE false) outbox`); err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "vacuum the outbox", slog.String("error", err.Error()))
		}
		return true
	}
	r.vacuums.Inc()
	r.log.DebugContext(ctx, "vacuumed the outbox", slog.Int64("dead_rows", dead), slog.Duration("took", time.Since(start)))
	return true
}
