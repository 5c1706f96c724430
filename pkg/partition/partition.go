package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// IntervalDefault is the width of a new partition when a Table sets none.
const IntervalDefault = 24 * time.Hour

// AheadMin is how far past now the partitions reach at least, whatever the
// interval: with minute-wide partitions three intervals would run out
// between two reconciler rounds.
const AheadMin = time.Hour

// AheadIntervals is how many intervals past the current one are created.
const AheadIntervals = 3

// lockTimeout bounds the wait for a parent's lock. A DROP waiting for its
// ACCESS EXCLUSIVE lock makes every later writer of the parent wait behind
// it, so it gives up soon and the next pass tries again.
const lockTimeout = "2s"

// lockClass is the first key of the advisory lock one pass over one table
// holds; the second is the table's (schema-qualified) name, so instances
// maintaining the same table take turns and different tables do not wait.
const lockClass = 0x70617274 // "part"

// Table is one partitioned table and its rule.
type Table struct {
	// Name is the partitioned parent, as the search path finds it.
	Name string
	// Interval is the width of a new partition, a whole number of minutes.
	// Defaults to IntervalDefault.
	Interval time.Duration
	// Horizon: a partition whose range ended at or before now - Horizon is
	// dropped. Zero keeps every partition.
	Horizon time.Duration
	// BeforeDrop runs in the transaction that drops p, before the DROP:
	// the owner copies out what must outlive the partition.
	BeforeDrop func(ctx context.Context, tx pgx.Tx, p Partition) error
}

// Partition is one partition of a table. A nil bound is MINVALUE (From) or
// MAXVALUE (To).
type Partition struct {
	Table, Name string
	From, To    *time.Time
}

// Holds reports whether t falls in p's range; a nil bound is unbounded.
func (p Partition) Holds(t time.Time) bool {
	return (p.From == nil || !t.Before(*p.From)) && (p.To == nil || t.Before(*p.To))
}

// Change is a partition a pass created or dropped.
type Change struct {
	Table     string    `json:"table"`
	Partition string    `json:"partition"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Dropped   bool      `json:"dropped,omitempty"`
}

// Validate checks an interval: at least a minute and a whole number of
// minutes, because partition names carry their bounds to the minute.
func Validate(interval time.Duration) error {
	if interval < time.Minute || interval%time.Minute != 0 {
		return fmt.Errorf("partition interval %s must be a whole number of minutes, at least 1m", interval)
	}
	return nil
}

// Name returns the name of table's partition for [from, to): the bounds in
// UTC to the minute, so a listing of the tables says what each holds.
func Name(table string, from, to time.Time) string {
	const layout = "20060102t1504"
	return fmt.Sprintf("%s_p%s_%s", table, from.UTC().Format(layout), to.UTC().Format(layout))
}

// listSQL reads the bounds of a parent's partitions; a bound that is not a
// quoted value (MINVALUE, MAXVALUE) reads as NULL. DEFAULT partitions have
// no FROM and are reported with both bounds NULL.
// The bound expression is deparsed once per partition: pg_get_expr is most
// of the statement's time (6.6 ms a call for 42 partitions, under load,
// when it ran once per bound).
const listSQL = `
SELECT c.relname, b.m[1]::timestamptz, b.m[2]::timestamptz
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
CROSS JOIN LATERAL (
    SELECT regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \((?:''([^'']*)''|[^)]*)\) TO \((?:''([^'']*)''|[^)]*)\)') AS m
    OFFSET 0 -- a fence: pulled up, the expression would run once per bound
) b
WHERE i.inhparent = $1::regclass
ORDER BY 2 NULLS FIRST`

// List returns table's partitions, oldest first.
func List(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, table string) ([]Partition, error) {
	rows, err := q.Query(ctx, listSQL, table)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Partition, error) {
		p := Partition{Table: table}
		err := row.Scan(&p.Name, &p.From, &p.To)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	return out, nil
}

// Maintainer runs passes over a list of tables.
type Maintainer struct {
	Pool   *pgxpool.Pool
	Tables []Table
	Log    *slog.Logger
}

// Ensure creates the partitions each table lacks from now on; it drops
// nothing. Services run it at start, so intake never finds no partition.
func (m *Maintainer) Ensure(ctx context.Context, now time.Time) ([]Change, error) {
	return m.pass(ctx, now, false)
}

// Run creates the partitions ahead and drops those behind each table's
// horizon. Safe to run from several instances at once: a table's pass holds
// an advisory lock, and everything is decided again under it.
func (m *Maintainer) Run(ctx context.Context, now time.Time) ([]Change, error) {
	return m.pass(ctx, now, true)
}

func (m *Maintainer) pass(ctx context.Context, now time.Time, drop bool) ([]Change, error) {
	var all []Change
	var errs []error
	for _, t := range m.Tables {
		c, err := m.create(ctx, t, now)
		all = append(all, c...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if drop && t.Horizon > 0 {
			c, err := m.drop(ctx, t, now)
			all = append(all, c...)
			errs = append(errs, err)
		}
	}
	for _, c := range all {
		verb := "created partition"
		if c.Dropped {
			verb = "dropped partition"
		}
		m.log().InfoContext(ctx, verb, slog.String("table", c.Table), slog.String("partition", c.Partition),
			slog.Time("from", c.From), slog.Time("to", c.To))
	}
	return all, errors.Join(errs...)
}

func (m *Maintainer) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}

// locked runs fn in a transaction holding t's advisory lock (waited for
// as long as ctx allows), with lock_timeout set for what fn locks.
func (m *Maintainer) locked(ctx context.Context, t Table, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, m.Pool, func(tx pgx.Tx) error {
		// The advisory lock first: another instance's pass may hold it for
		// a while (creating a day of minute partitions), and lock_timeout
		// would cut that wait short too. It bounds the parent's locks only.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(current_schema() || '.' || $2))`, lockClass, t.Name); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, lockTimeout); err != nil {
			return err
		}
		return fn(tx)
	})
}

// Plan returns the ranges to create so that [floor(now), now+ahead) is
// covered, given the existing partitions: new ranges are aligned to the
// interval (in UTC) and start where an existing partition ends, so
// partitions of another width (the migration's first, a legacy table
// attached up to its cutover) are never overlapped.
func Plan(existing []Partition, interval time.Duration, now time.Time) [][2]time.Time {
	if interval <= 0 {
		interval = IntervalDefault
	}
	ahead := max(time.Duration(AheadIntervals+1)*interval, AheadMin)
	cur := now.UTC().Truncate(interval)
	end := now.UTC().Add(ahead)
	var out [][2]time.Time
	for cur.Before(end) {
		if p, ok := covering(existing, cur); ok {
			if p.To == nil {
				return out
			}
			cur = p.To.UTC()
			continue
		}
		next := cur.Truncate(interval).Add(interval)
		for _, p := range existing {
			if p.From != nil && p.From.After(cur) && p.From.Before(next) {
				next = p.From.UTC()
			}
		}
		out = append(out, [2]time.Time{cur, next})
		cur = next
	}
	return out
}

func covering(ps []Partition, t time.Time) (Partition, bool) {
	for _, p := range ps {
		if p.From == nil && p.To == nil {
			continue // DEFAULT
		}
		if p.Holds(t) {
			return p, true
		}
	}
	return Partition{}, false
}

func (m *Maintainer) create(ctx context.Context, t Table, now time.Time) ([]Change, error) {
	var out []Change
	err := m.locked(ctx, t, func(tx pgx.Tx) error {
		out = nil
		existing, err := List(ctx, tx, t.Name)
		if err != nil {
			return err
		}
		for _, r := range Plan(existing, t.Interval, now) {
			name := Name(t.Name, r[0], r[1])
			// CREATE ... PARTITION OF would take an ACCESS EXCLUSIVE lock on
			// the parent; ATTACH takes SHARE UPDATE EXCLUSIVE, which writers
			// do not wait for, and checks an empty table at once.
			parent := pgx.Identifier{t.Name}.Sanitize()
			ident := pgx.Identifier{name}.Sanitize()
			if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`, ident, parent)); err != nil {
				return fmt.Errorf("create partition %s: %w", name, err)
			}
			if _, err := tx.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)`,
				parent, ident, quoteTime(r[0]), quoteTime(r[1]))); err != nil {
				return fmt.Errorf("attach partition %s: %w", name, err)
			}
			out = append(out, Change{Table: t.Name, Partition: name, From: r[0], To: r[1]})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create partitions of %s: %w", t.Name, err)
	}
	return out, nil
}

func quoteTime(t time.Time) string { return "'" + t.UTC().Format(time.RFC3339Nano) + "'" }

// drop drops t's partitions whose range ended at or before now - horizon,
// one transaction each: BeforeDrop, then the DROP, whose ACCESS EXCLUSIVE
// lock on the parent is held only from the DROP to the commit.
func (m *Maintainer) drop(ctx context.Context, t Table, now time.Time) ([]Change, error) {
	cutoff := now.Add(-t.Horizon)
	existing, err := List(ctx, m.Pool, t.Name)
	if err != nil {
		return nil, err
	}
	var out []Change
	for _, p := range existing {
		if p.To == nil || p.To.After(cutoff) {
			continue
		}
		dropped := false
		err := m.locked(ctx, t, func(tx pgx.Tx) error {
			// Another instance may have dropped it while this one waited.
			var still bool
			if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{p.Name}.Sanitize()).Scan(&still); err != nil || !still {
				return err
			}
			if t.BeforeDrop != nil {
				if err := t.BeforeDrop(ctx, tx, p); err != nil {
					return fmt.Errorf("before dropping %s: %w", p.Name, err)
				}
			}
			if _, err := tx.Exec(ctx, `DROP TABLE `+pgx.Identifier{p.Name}.Sanitize()); err != nil {
				return fmt.Errorf("drop partition %s: %w", p.Name, err)
			}
			dropped = true
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("drop partitions of %s: %w", t.Name, err)
		}
		if dropped {
			c := Change{Table: t.Name, Partition: p.Name, To: *p.To, Dropped: true}
			if p.From != nil {
				c.From = *p.From
			}
			out = append(out, c)
		}
	}
	return out, nil
}
