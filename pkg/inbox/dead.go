package inbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotDead: the event exists but is not dead, so a dead-only replay left
// it alone. Replay replays an event whatever its status.
var ErrNotDead = errors.New("event is not dead")

// Limits of the dead-list operations when a filter sets none.
const (
	// DeadListLimitDefault caps ListDead.
	DeadListLimitDefault = 100
	// DeadReplayLimitDefault caps ReplayDeadMatching.
	DeadReplayLimitDefault = 1000
)

// DeadFilter selects dead events. Every zero field matches everything.
type DeadFilter struct {
	Provider      string
	SourceAccount string
	Environment   string
	// EventType is the provider's event type, matched exactly
	// (customer.subscription.updated).
	EventType    string
	ResourceType string
	ResourceID   string
	// Since keeps events received at or after it. Defaults to all.
	Since time.Time
	// Limit caps the rows. Defaults to DeadListLimitDefault when listing and
	// DeadReplayLimitDefault when replaying.
	Limit int
}

// where returns the filter's condition with placeholders from $first on,
// and its arguments: the same text serves the list and, behind the outbox
// statement's own $1, the replay.
func (f DeadFilter) where(first int) (string, []any) {
	var b strings.Builder
	b.WriteString("status = 'dead'")
	for i, col := range []string{"provider", "source_account", "environment", "event_type", "resource_type", "resource_id"} {
		fmt.Fprintf(&b, "\n  AND ($%d::text = '' OR %s = $%[1]d)", first+i, col)
	}
	fmt.Fprintf(&b, "\n  AND received_at >= $%d\nORDER BY received_at LIMIT $%d", first+6, first+7)
	cond := b.String()
	return cond, []any{f.Provider, f.SourceAccount, f.Environment, f.EventType, f.ResourceType, f.ResourceID, f.Since}
}

// ListDead reads the dead events f selects, oldest first, with their
// attempts, last error and resource, without payloads.
func ListDead(ctx context.Context, pool *pgxpool.Pool, f DeadFilter) ([]Row, error) {
	cond, args := f.where(1)
	rows, err := pool.Query(ctx, `SELECT `+rowColumns+` FROM webhook_inbox WHERE `+cond,
		append(args, limitOr(f.Limit, DeadListLimitDefault))...)
	if err != nil {
		return nil, fmt.Errorf("list dead events: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRow)
	if err != nil {
		return nil, fmt.Errorf("list dead events: %w", err)
	}
	return out, nil
}

// ReplayDeadMatching re-enqueues the dead events f selects, oldest first,
// through the outbox on their own keys. Safe to run from several processes
// at once: rows another replay holds are skipped, never enqueued twice.
func ReplayDeadMatching(ctx context.Context, pool *pgxpool.Pool, f DeadFilter) (int64, error) {
	cond, args := f.where(2)
	picked := `SELECT provider, source_account, environment, event_id FROM webhook_inbox WHERE ` + cond + ` FOR UPDATE SKIP LOCKED`
	args = append([]any{"replay"}, append(args, limitOr(f.Limit, DeadReplayLimitDefault))...)
	tag, err := probedExec(ctx, pool, fmt.Sprintf(enqueueSQL, picked), args...)
	if err != nil {
		return 0, fmt.Errorf("replay dead events: %w", err)
	}
	return tag.RowsAffected(), nil
}

const replayDeadOneSQL = `
SELECT provider, source_account, environment, event_id FROM webhook_inbox
WHERE provider = $2 AND source_account = $3 AND environment = $4 AND event_id = $5 AND status = 'dead'
FOR UPDATE`

// ReplayDeadEvent re-enqueues one dead event. It returns ErrNotFound when
// there is no such event and an error wrapping ErrNotDead (naming the
// status) when it is not dead: an operator replaying "the dead one" learns
// it already moved on rather than sending it round again. It waits for a
// concurrent replay of the same event, then finds it pending.
func ReplayDeadEvent(ctx context.Context, pool *pgxpool.Pool, k Key) error {
	status, err := enqueueOne(ctx, pool, replayDeadOneSQL, "replay", k)
	switch {
	case err != nil:
		return fmt.Errorf("replay dead event %s: %w", k.EventID, err)
	case status == "":
		return nil
	}
	return fmt.Errorf("replay dead event %s: %w (status %s)", k.EventID, ErrNotDead, status)
}

// enqueueOne runs the scheduler's enqueue (enqueueSQL, for reason) on the
// one event pick selects and locks by k. It returns "" when the event was
// enqueued, else the status the event has (pick did not take it), and
// ErrNotFound when there is no such event.
func enqueueOne(ctx context.Context, pool *pgxpool.Pool, pick, reason string, k Key) (string, error) {
	tag, err := probedExec(ctx, pool, fmt.Sprintf(enqueueSQL, pick), reason, k.Provider, k.SourceAccount, k.Environment, k.EventID)
	if err != nil {
		return "", err
	}
	if tag.RowsAffected() > 0 {
		return "", nil
	}
	row, err := Get(ctx, pool, k, false)
	if err != nil {
		return "", err
	}
	return row.Status, nil
}

func limitOr(limit, def int) int {
	if limit > 0 {
		return limit
	}
	return def
}
