package inbox

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// bodyProbesSQL is set, for its transaction only, before every statement
// that reads a body or asks whether one is left (bodySQL, hasBodySQL). Each
// looks one body up in its partition of webhook_inbox_body by primary key;
// the only other plan for a partition is a sequential scan of it, and the
// planner takes that one for a partition it believes empty. A partition is
// believed empty when it was analyzed before it filled (partitions are
// created ahead; an ANALYZE of the table, an operator's vacuumdb --analyze,
// reaches them empty), and a cached plan keeps that belief until the next
// invalidation: the processor then read the partition that receives the
// day's bodies whole for every event of every batch (126 buffers per event,
// 120 ms per batch of 28 at 2,000/s). With sequential scans off the primary
// key's probe is the plan whatever the partition's statistics say, and
// TestBodyProbesStayProbesWhenAPartitionFillsAfterItsPlan checks it with a
// cached plan.
const bodyProbesSQL = `SELECT set_config('enable_seqscan', 'off', true)`

// bodyBatchSQL is bodyProbesSQL for a statement whose partitions are named
// by a parameter (loadBodiesSQL): its plan is made for each execution
// (plan_cache_mode = force_custom_plan), so the planner keeps only the
// partitions that hold those values, not every partition of the table.
const bodyBatchSQL = `SELECT set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_custom_plan', true)`

// probed runs sql with bodyProbesSQL set, in one round trip: a batch is one
// implicit transaction (its statements run until the one Sync that ends it),
// so the settings hold for sql and end with it. It hands the statement's
// rows to read (nil: the statement returns none that matter) and returns its
// command tag.
func probed(ctx context.Context, pool *pgxpool.Pool, read func(pgx.Rows) error, sql string, args ...any) (pgconn.CommandTag, error) {
	return probedWith(ctx, pool, bodyProbesSQL, read, sql, args...)
}

// probedWith is probed with settings (bodyProbesSQL or bodyBatchSQL).
func probedWith(ctx context.Context, pool *pgxpool.Pool, settings string, read func(pgx.Rows) error, sql string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue(settings)
	b.Queue(sql, args...)
	br := pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return pgconn.CommandTag{}, err
	}
	rows, err := br.Query()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	if read != nil {
		if err := read(rows); err != nil {
			rows.Close()
			return pgconn.CommandTag{}, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return pgconn.CommandTag{}, err
	}
	tag := rows.CommandTag()
	return tag, br.Close()
}

// probedExec is probed for a statement whose rows are not read.
func probedExec(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (pgconn.CommandTag, error) {
	return probed(ctx, pool, nil, sql, args...)
}
