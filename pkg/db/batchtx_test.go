package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/db"
)

// batchCounter counts the batches (round trips) sent on a pool's
// connections.
type batchCounter struct{ n int }

func (c *batchCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n++
	return ctx
}
func (c *batchCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *batchCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (c *batchCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n++
	return ctx
}
func (c *batchCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// batchTxPool returns a pool of one traced connection on a schema with
// table batchtx, and another pool on the same schema.
func batchTxPool(t *testing.T) (*pgxpool.Pool, *batchCounter, *pgxpool.Pool) {
	t.Helper()
	s := dbtest.New(t)
	ctx := t.Context()
	_, err := s.Pool.Exec(ctx, `CREATE TABLE batchtx (id int PRIMARY KEY)`)
	require.NoError(t, err)
	cfg := s.Pool.Config().Copy()
	tr := &batchCounter{}
	cfg.ConnConfig.Tracer = tr
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, tr, s.Pool
}

func insert(ids ...int) *pgx.Batch {
	b := &pgx.Batch{}
	for _, id := range ids {
		b.Queue(`INSERT INTO batchtx VALUES ($1)`, id)
	}
	return b
}

func stored(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT id FROM batchtx ORDER BY id`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	return ids
}

// A transaction of two batches is two round trips, and commits both
// batches together: nothing of the first is visible before COMMIT.
func TestBatchTxCommitsTwoBatchesInTwoRoundTrips(t *testing.T) {
	t.Parallel()
	pool, tr, other := batchTxPool(t)
	ctx := t.Context()
	count := func() int {
		var n int
		require.NoError(t, other.QueryRow(ctx, `SELECT count(*) FROM batchtx`).Scan(&n))
		return n
	}

	tr.n = 0
	tx, err := db.BeginBatches(ctx, pool)
	require.NoError(t, err)
	defer tx.Close(ctx)
	require.NoError(t, tx.Send(ctx, insert(1, 2)))
	require.Zero(t, count(), "the first batch is inside the transaction")
	require.NoError(t, tx.Commit(ctx, insert(3)))
	require.Equal(t, 2, tr.n, "BEGIN and COMMIT travel with the batches")
	require.Equal(t, 3, count())
	tx.Close(ctx) // after Commit: nothing
	require.Equal(t, []int{1, 2, 3}, stored(t, pool))
}

// A failed statement in the last batch skips its COMMIT: nothing of either
// batch stays, and the connection goes back to the pool usable.
func TestBatchTxFailureInTheLastBatchCommitsNothing(t *testing.T) {
	t.Parallel()
	pool, _, _ := batchTxPool(t)
	ctx := t.Context()
	tx, err := db.BeginBatches(ctx, pool)
	require.NoError(t, err)
	require.NoError(t, tx.Send(ctx, insert(1)))
	err = tx.Commit(ctx, insert(2, 2)) // duplicate key
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23505", pgErr.Code)
	tx.Close(ctx)
	require.Empty(t, stored(t, pool), "rolled back")
}

// A callback's error in the first batch (the processor's fence check)
// ends the transaction with nothing written, though the server ran the
// statements queued after it.
func TestBatchTxCallbackErrorRollsBack(t *testing.T) {
	t.Parallel()
	pool, _, _ := batchTxPool(t)
	ctx := t.Context()
	fenced := errors.New("fenced")
	b := &pgx.Batch{}
	b.Queue(`SELECT 1`).Exec(func(pgconn.CommandTag) error { return fenced })
	b.Queue(`INSERT INTO batchtx VALUES (1)`)
	tx, err := db.BeginBatches(ctx, pool)
	require.NoError(t, err)
	require.ErrorIs(t, tx.Send(ctx, b), fenced)
	tx.Close(ctx)
	require.Empty(t, stored(t, pool))

	// The connection (the pool's only one) is usable, outside any
	// transaction.
	tx, err = db.BeginBatches(ctx, pool)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx, insert(7)))
	require.Equal(t, []int{7}, stored(t, pool))
}
