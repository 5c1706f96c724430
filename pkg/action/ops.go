package action

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/fact"
)

// Limits of the operations when a filter sets none.
const (
	// ListLimitDefault caps List.
	ListLimitDefault = 100
	// ReplayLimitDefault caps ReplayDeadMatching.
	ReplayLimitDefault = 1000
)

// Filter selects actions. Every zero field matches everything.
type Filter struct {
	// Status defaults to dead.
	Status        string
	Provider      string
	SourceAccount string
	Environment   string
	Kind          string
	// Since keeps actions created at or after it.
	Since time.Time
	// Limit caps the rows. Defaults to ListLimitDefault when listing and
	// ReplayLimitDefault when replaying.
	Limit int
}

const actionColumns = `provider, source_account, environment, subject_id, kind, status, attempts,
    CASE WHEN status NOT IN ('sent', 'dead', 'skipped') THEN next_attempt_at END, coalesce(last_error, ''), event_id, created_at, done_at,
    coalesce(claimed_by, '')`

func scanAction(row pgx.CollectableRow) (Action, error) {
	var a Action
	err := row.Scan(&a.Provider, &a.SourceAccount, &a.Environment, &a.SubjectID, &a.Kind, &a.Status, &a.Attempts,
		&a.NextAttemptAt, &a.LastError, &a.EventID, &a.CreatedAt, &a.DoneAt, &a.ClaimedBy)
	a.IdempotencyKey = a.Key.String()
	return a, err
}

// where returns the filter's condition with placeholders from $first on.
// Every status but sent is in action_unsent, so listing dead (or pending)
// actions reads that index, not the whole table.
func (f Filter) where(first int) (string, []any) {
	var b strings.Builder
	fmt.Fprintf(&b, "status = $%d", first)
	for i, col := range []string{"provider", "source_account", "environment", "kind"} {
		fmt.Fprintf(&b, "\n  AND ($%d::text = '' OR %s = $%[1]d)", first+1+i, col)
	}
	fmt.Fprintf(&b, "\n  AND created_at >= $%d\nORDER BY created_at LIMIT $%d", first+5, first+6)
	status := f.Status
	if status == "" {
		status = StatusDead
	}
	return b.String(), []any{status, f.Provider, f.SourceAccount, f.Environment, f.Kind, f.Since}
}

// List reads the actions f selects (dead by default), oldest first.
func List(ctx context.Context, pool *pgxpool.Pool, f Filter) ([]Action, error) {
	cond, args := f.where(1)
	rows, err := pool.Query(ctx, `SELECT `+actionColumns+` FROM action WHERE `+cond,
		append(args, limitOr(f.Limit, ListLimitDefault))...)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanAction)
	if err != nil {
		return nil, fmt.Errorf("list actions: %w", err)
	}
	if out == nil {
		out = []Action{}
	}
	return out, nil
}

// Shown is one action with the fact it is about (nil when none is
// recorded) and, while it waits, why.
type Shown struct {
	Action Action     `json:"action"`
	Fact   *fact.Fact `json:"fact"`
	// Waiting says why a pending action is not being sent, when that is
	// known (no URL configured for its kind).
	Waiting string `json:"waiting,omitempty"`
}

// Show reads one action, whatever its status, with its fact: the fact of
// the kind's declared type in effects (DefaultEffects' when effects does
// not declare the kind; none for a transition's effect). It returns
// ErrNotFound when there is none.
func Show(ctx context.Context, pool *pgxpool.Pool, k Key, effects Effects) (Shown, error) {
	rows, err := pool.Query(ctx, `SELECT `+actionColumns+` FROM action
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND subject_id = $4 AND kind = $5`,
		k.Provider, k.SourceAccount, k.Environment, k.SubjectID, k.Kind)
	if err != nil {
		return Shown{}, fmt.Errorf("show action %s: %w", k, err)
	}
	a, err := pgx.CollectExactlyOneRow(rows, scanAction)
	if errors.Is(err, pgx.ErrNoRows) {
		return Shown{}, fmt.Errorf("show action %s: %w", k, ErrNotFound)
	}
	if err != nil {
		return Shown{}, fmt.Errorf("show action %s: %w", k, err)
	}
	out := Shown{Action: a}
	factType := effects.With(DefaultEffects).FactType(k.Kind)
	if factType == "" {
		return out, nil
	}
	f, err := fact.Get(ctx, pool, fact.Key{Provider: k.Provider, SourceAccount: k.SourceAccount, Environment: k.Environment,
		Type: factType, ID: k.SubjectID})
	switch {
	case errors.Is(err, fact.ErrNotFound):
	case err != nil:
		return Shown{}, fmt.Errorf("show action %s: %w", k, err)
	default:
		out.Fact = &f
	}
	return out, nil
}

// replaySQL puts dead actions back to pending, due now, with a fresh
// attempt budget. attempts keeps growing (it is the claims' token), and
// last_error stays until the next attempt replaces it. %s picks the rows
// and must lock them.
const replaySQL = `
WITH picked AS (%s)
UPDATE action a SET status = 'pending', next_attempt_at = now(), done_at = NULL, attempts_at_replay = a.attempts
FROM picked p
WHERE a.provider = p.provider AND a.source_account = p.source_account AND a.environment = p.environment
  AND a.subject_id = p.subject_id AND a.kind = p.kind AND a.status = 'dead'`

const replayOneSQL = `
SELECT provider, source_account, environment, subject_id, kind FROM action
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND subject_id = $4 AND kind = $5 AND status = 'dead'
FOR UPDATE`

// ReplayDead sends one dead action again (same key). It returns ErrNotFound
// when there is no such action and an error wrapping ErrNotDead (naming the
// status) when it is not dead: a sent action is never sent again.
func ReplayDead(ctx context.Context, pool *pgxpool.Pool, k Key) error {
	tag, err := pool.Exec(ctx, fmt.Sprintf(replaySQL, replayOneSQL), k.Provider, k.SourceAccount, k.Environment, k.SubjectID, k.Kind)
	if err != nil {
		return fmt.Errorf("replay action %s: %w", k, err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	sh, err := Show(ctx, pool, k, nil)
	if err != nil {
		return err
	}
	return fmt.Errorf("replay action %s: %w (status %s)", k, ErrNotDead, sh.Action.Status)
}

// ReplayDeadMatching replays the dead actions f selects (its Status is
// ignored), oldest first. Safe to run from several processes at once.
func ReplayDeadMatching(ctx context.Context, pool *pgxpool.Pool, f Filter) (int64, error) {
	f.Status = StatusDead
	cond, args := f.where(1)
	picked := `SELECT provider, source_account, environment, subject_id, kind FROM action WHERE ` + cond + ` FOR UPDATE SKIP LOCKED`
	tag, err := pool.Exec(ctx, fmt.Sprintf(replaySQL, picked), append(args, limitOr(f.Limit, ReplayLimitDefault))...)
	if err != nil {
		return 0, fmt.Errorf("replay dead actions: %w", err)
	}
	return tag.RowsAffected(), nil
}

// forResourceSQL reads the actions about a resource: those whose subject it
// is (an invoice), and those about facts recorded for it (the receipts of a
// subscription's invoices), through the primary key and fact_resource. The
// facts are a subquery of this one statement, not a read through the fact
// package: which actions to return is decided by that subquery, and one
// statement reads them at a single snapshot.
//
// The facts drive: each one probes the primary key with its whole subject
// (LATERAL), below an OFFSET 0 fence. As a semi-join (IN), a planner without
// statistics read the primary key's range of the account (every action of
// it, 100,000 at a million events: 600 ms) and matched each against the
// facts.
const forResourceSQL = `
SELECT ` + actionColumns + ` FROM action
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND subject_id = $5
UNION
SELECT a.* FROM (
    SELECT provider, source_account, environment, fact_id FROM fact
    WHERE provider = $1 AND source_account = $2 AND environment = $3 AND resource_type = $4 AND resource_id = $5
    OFFSET 0) f
CROSS JOIN LATERAL (
    SELECT ` + actionColumns + ` FROM action
    WHERE provider = f.provider AND source_account = f.source_account AND environment = f.environment
      AND subject_id = f.fact_id) a
ORDER BY 11 DESC LIMIT $6`

// ForResource reads up to limit actions about a resource, newest first.
func ForResource(ctx context.Context, pool *pgxpool.Pool, provider, account, environment, typ, id string, limit int) ([]Action, error) {
	rows, err := pool.Query(ctx, forResourceSQL, provider, account, environment, typ, id, limitOr(limit, ListLimitDefault))
	if err != nil {
		return nil, fmt.Errorf("read actions of %s %s: %w", typ, id, err)
	}
	out, err := pgx.CollectRows(rows, scanAction)
	if err != nil {
		return nil, fmt.Errorf("read actions of %s %s: %w", typ, id, err)
	}
	return out, nil
}

func limitOr(limit, def int) int {
	if limit > 0 {
		return limit
	}
	return def
}

// skipSQL gives one dead action up: skipped is final, never claimed (the
// claim's status list leaves it out) and settled for the ordered claim's
// probe, so the next action of its stream is taken. The status check is
// in the update itself: a replay racing with it (replaySQL, also only from
// dead) waits on the row lock, and the second of the two finds the status
// changed and writes nothing; exactly one of them wins. The reason goes to
// last_error, followed by the attempts' last error.
const skipSQL = `
UPDATE action SET status = 'skipped', next_attempt_at = now(), done_at = now(),
    last_error = CASE WHEN $6 = '' THEN 'skipped by an operator' ELSE 'skipped by an operator: ' || $6 END
        || coalesce(' (after: ' || last_error || ')', '')
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND subject_id = $4 AND kind = $5 AND status = 'dead'`

// Skip gives up one dead action: it becomes skipped, is never sent, and
// the later actions of its stream (a subscriber's next changes of the
// resource) are claimed in their order. It returns ErrNotFound when there
// is no such action and an error wrapping ErrNotDead (naming the status)
// when it is not dead.
func Skip(ctx context.Context, pool *pgxpool.Pool, k Key, reason string) error {
	tag, err := pool.Exec(ctx, skipSQL, k.Provider, k.SourceAccount, k.Environment, k.SubjectID, k.Kind, reason)
	if err != nil {
		return fmt.Errorf("skip action %s: %w", k, err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	sh, err := Show(ctx, pool, k, nil)
	if err != nil {
		return err
	}
	return fmt.Errorf("skip action %s: %w (status %s)", k, ErrNotDead, sh.Action.Status)
}

// Open is how many actions of one kind and status are not sent yet, and how
// long ago the oldest of them was recorded.
type Open struct {
	Kind   string
	Status string
	Count  int64
	// AgeSeconds is the age of the oldest, by the database's clock.
	AgeSeconds float64
}

// openSQL reads action_unsent (and those rows' created_at) only: sent
// actions, nearly all of them, are never read. Skipped ones are as final as
// sent: they are in action_unsent, few, and left out of the count.
const openSQL = `
SELECT kind, status, count(*), extract(epoch FROM now() - min(created_at))::float8
FROM action WHERE status <> 'sent' AND status <> 'skipped' GROUP BY kind, status`

// CountOpen counts the actions not sent yet, by kind and status, for the
// gauges of every scrape.
func CountOpen(ctx context.Context, pool *pgxpool.Pool) ([]Open, error) {
	rows, err := pool.Query(ctx, openSQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Open, error) {
		var o Open
		err := row.Scan(&o.Kind, &o.Status, &o.Count, &o.AgeSeconds)
		return o, err
	})
}
