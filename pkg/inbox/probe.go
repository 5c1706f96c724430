package inbox

import (
	"context"
	"fmt"

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

// probed runs sql in a transaction with bodyProbesSQL set, in one round
// trip, and hands its rows to read (nil: the statement returns none that
// matter). It returns the statement's command tag.
func probed(ctx context.Context, pool *pgxpool.Pool, read func(pgx.Rows) error, sql string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(bodyProbesSQL)
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	br := pool.SendBatch(ctx, b)
	// On an error the transaction is left open and the pool closes the
	// connection when it is released (it never reuses one in a
	// transaction).
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return pgconn.CommandTag{}, err
		}
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
	if _, err := br.Exec(); err != nil {
		return pgconn.CommandTag{}, fmt.Errorf("commit: %w", err)
	}
	return tag, br.Close()
}

// probedExec is probed for a statement whose rows are not read.
func probedExec(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (pgconn.CommandTag, error) {
	return probed(ctx, pool, nil, sql, args...)
}
