package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/partition"
)

// Actions: what a record says was done.
const (
	ActionPayloadRead     = "payload_read"
	ActionReplayEvent     = "replay_event"
	ActionReplayDead      = "replay_dead"
	ActionReplayResource  = "replay_resource"
	ActionReplayPartition = "replay_partition"
	ActionPurge           = "purge"
	ActionReplayAction    = "replay_action"
	// ActionSkipAction: a dead action given up (`hookyard actions skip`,
	// POST /v1/actions/skip); the target holds the key and the reason.
	ActionSkipAction  = "skip_action"
	ActionFenceResize = "fence_resize"
	ActionJobCancel   = "job_cancel"
	// ActionErase: an erasure request's personal data removed
	// (`hookyard erase`, POST /v1/erase); rows is every row changed.
	ActionErase = "erase"
)

// Entry is one ops_audit row.
type Entry struct {
	ID         int64     `json:"id"`
	RecordedAt time.Time `json:"recorded_at"`
	// Actor is who: a token's name (OPS_TOKEN for that token) or
	// cli:<OS user>.
	Actor  string `json:"actor"`
	Action string `json:"action"`
	// Target is the identity or the filter the operation named.
	Target json.RawMessage `json:"target"`
	// Rows is how many rows were read, replayed or purged; for a job, as
	// known when it started (the job's own progress has the rest).
	Rows int64 `json:"rows"`
}

// Execer runs a statement: a pool, or a transaction the record must
// commit with.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

const recordSQL = `INSERT INTO ops_audit (actor, action, target, rows) VALUES ($1, $2, $3, $4)`

// Record writes one record. target is marshalled to JSON (nil: {}).
func Record(ctx context.Context, db Execer, actor, action string, target any, rows int64) error {
	raw := []byte("{}")
	if target != nil {
		var err error
		if raw, err = json.Marshal(target); err != nil {
			return fmt.Errorf("audit %s: encode target: %w", action, err)
		}
	}
	if _, err := db.Exec(ctx, recordSQL, actor, action, raw, rows); err != nil {
		return fmt.Errorf("audit %s: %w", action, err)
	}
	return nil
}

// ListLimitDefault is how many records a listing returns unless told.
const ListLimitDefault = 100

const listSQL = `SELECT id, recorded_at, actor, action, target, rows FROM ops_audit
WHERE recorded_at >= $1 ORDER BY recorded_at DESC, id DESC LIMIT $2`

// List returns the records since since (zero: all), newest first.
func List(ctx context.Context, pool *pgxpool.Pool, since time.Time, limit int) ([]Entry, error) {
	if limit <= 0 {
		limit = ListLimitDefault
	}
	rows, err := pool.Query(ctx, listSQL, since, limit)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
		var e Entry
		err := r.Scan(&e.ID, &e.RecordedAt, &e.Actor, &e.Action, &e.Target, &e.Rows)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	if out == nil {
		out = []Entry{}
	}
	return out, nil
}

// PurgeChunk bounds one delete of Purge, so a first purge of a long
// history does not hold one long transaction.
const PurgeChunk = 5000

const purgeSQL = `DELETE FROM ops_audit WHERE id IN (
    SELECT id FROM ops_audit WHERE recorded_at < $1 ORDER BY recorded_at LIMIT $2 FOR UPDATE SKIP LOCKED)`

// Purge deletes the records older than cutoff, oldest first, in chunks.
func Purge(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time) (int64, error) {
	var total int64
	for {
		tag, err := pool.Exec(ctx, purgeSQL, cutoff, PurgeChunk)
		if err != nil {
			return total, fmt.Errorf("purge audit: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < PurgeChunk {
			return total, nil
		}
	}
}

// TableName is ops_audit, RANGE-partitioned on recorded_at (migration
// 00022).
const TableName = "ops_audit"

// Table is ops_audit's partition rule: partitions interval wide, dropped
// whole once their range ended age ago (retention.audit_age; 0 keeps them).
// Purge still deletes what is older than the age row by row (records from
// before the partitions, and the part of a partition past the age).
func Table(interval, age time.Duration) partition.Table {
	return partition.Table{Name: TableName, Interval: interval, Horizon: age}
}
