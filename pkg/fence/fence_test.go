package fence_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/db"
	"github.com/hookyard/hookyard/pkg/fence"
)

const topic = "hookyard.events"

func checkInTx(ctx context.Context, t *testing.T, s *dbtest.Schema, tok fence.Token) error {
	t.Helper()
	return pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error { return fence.Check(ctx, tx, tok) })
}

// Partition fencing holds only while one resource maps to one partition:
// Register must refuse a topic whose size differs from the recorded one.
// Fails if Register stops comparing the recorded count.
func TestRegisterRefusesChangedPartitionCount(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()

	require.NoError(t, fence.Register(ctx, s.Pool, topic, 4))
	require.NoError(t, fence.Register(ctx, s.Pool, topic, 4), "re-registering the same count must succeed")
	err := fence.Register(ctx, s.Pool, topic, 5)
	require.ErrorIs(t, err, fence.ErrPartitionCountChanged)

	var n int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT partition_count FROM topic_fence WHERE topic = $1`, topic).Scan(&n))
	require.Equal(t, 4, n, "a refused register must not overwrite the recorded count")
}

// Invariant 6: each Take bumps the generation, and a writer holding an older
// generation is refused by Check. Fails if Take stops bumping or Check stops
// comparing generations.
func TestTakeBumpsGenerationAndOldTokenIsFenced(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	require.NoError(t, fence.Register(ctx, s.Pool, topic, 4))

	old, err := fence.Take(ctx, s.Pool, topic, 2, 4, "a")
	require.NoError(t, err)
	require.Equal(t, int64(1), old.Generation)
	require.NoError(t, checkInTx(ctx, t, s, old))

	cur, err := fence.Take(ctx, s.Pool, topic, 2, 4, "b")
	require.NoError(t, err)
	require.Equal(t, old.Generation+1, cur.Generation)

	require.ErrorIs(t, checkInTx(ctx, t, s, old), fence.ErrFenced)
	require.NoError(t, checkInTx(ctx, t, s, cur))

	// QueueCheck (the form the processor uses) refuses the old token too.
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		fence.QueueCheck(b, old)
		return tx.SendBatch(ctx, b).Close()
	})
	require.ErrorIs(t, err, fence.ErrFenced)

	// Another partition is independent.
	other, err := fence.Take(ctx, s.Pool, topic, 3, 4, "a")
	require.NoError(t, err)
	require.Equal(t, int64(1), other.Generation)

	// A partition nobody took is fenced for everyone.
	require.ErrorIs(t, checkInTx(ctx, t, s, fence.Token{Topic: topic, Partition: 0, Generation: 1}), fence.ErrFenced)
	// Take with a different partition count is refused.
	_, err = fence.Take(ctx, s.Pool, topic, 2, 8, "c")
	require.ErrorIs(t, err, fence.ErrPartitionCountChanged)
}

// Invariant 6, the race: a transaction that passed Check holds the fence row
// FOR SHARE, so a concurrent Take waits until that transaction ends; no
// take-over can slip between a writer's check and its commit. Fails if the
// check stops locking (the Take would finish while the writer is still open).
func TestTakeWaitsForWriterThatPassedCheck(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(t, fence.Register(ctx, s.Pool, topic, 1))
	tok, err := fence.Take(ctx, s.Pool, topic, 0, 1, "writer")
	require.NoError(t, err)

	// A one-connection pool for the taker, so its backend pid is known.
	takerPool, err := db.Open(ctx, dbtest.URL(), db.Options{MaxConns: 1, SearchPath: s.Name})
	require.NoError(t, err)
	t.Cleanup(takerPool.Close)
	var takerPID uint32
	require.NoError(t, takerPool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&takerPID))

	tx, err := s.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	require.NoError(t, fence.Check(ctx, tx, tok))
	var writerPID uint32
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&writerPID))

	type taken struct {
		tok fence.Token
		err error
	}
	done := make(chan taken, 1)
	go func() {
		t, err := fence.Take(ctx, takerPool, topic, 0, 1, "taker")
		done <- taken{t, err}
	}()

	// Wait until the taker is blocked by the writer; it must not finish first.
	blocked := false
	for !blocked {
		select {
		case r := <-done:
			t.Fatalf("take-over finished while a writer that passed the check was still open: %+v", r)
		case <-ctx.Done():
			t.Fatal("taker neither blocked nor finished")
		case <-time.After(10 * time.Millisecond):
		}
		var pids []uint32
		require.NoError(t, s.Pool.QueryRow(ctx, `SELECT pg_blocking_pids($1)`, int32(takerPID)).Scan(&pids))
		for _, p := range pids {
			blocked = blocked || p == writerPID
		}
	}

	// Still blocked right before the writer commits: the take cannot have
	// happened between the writer's check and its commit.
	select {
	case r := <-done:
		t.Fatalf("take-over finished while a writer that passed the check was still open: %+v", r)
	default:
	}
	_, err = tx.Exec(ctx, `CREATE TABLE writer_effect (generation bigint)`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO writer_effect VALUES ($1)`, tok.Generation)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx), "the writer that passed the check commits under its generation")

	var r taken
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("take never finished after the writer ended")
	}
	require.NoError(t, r.err)
	require.Equal(t, tok.Generation+1, r.tok.Generation)
	require.ErrorIs(t, checkInTx(ctx, t, s, tok), fence.ErrFenced)
}

// Resize records the new partition count and bumps every generation, so no
// writer from before the resize can write. Fails if Resize stops bumping or
// stops recording the count.
func TestResizeBumpsEveryGenerationAndRecordsCount(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	require.NoError(t, fence.Register(ctx, s.Pool, topic, 2))
	t0, err := fence.Take(ctx, s.Pool, topic, 0, 2, "a")
	require.NoError(t, err)
	t1, err := fence.Take(ctx, s.Pool, topic, 1, 2, "a")
	require.NoError(t, err)

	require.NoError(t, fence.Resize(ctx, s.Pool, topic, 4))

	var n int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT partition_count FROM topic_fence WHERE topic = $1`, topic).Scan(&n))
	require.Equal(t, 4, n)
	rows, err := s.Pool.Query(ctx, `SELECT partition, generation FROM partition_fence WHERE topic = $1 ORDER BY partition`, topic)
	require.NoError(t, err)
	gens := map[int32]int64{}
	for rows.Next() {
		var p int32
		var g int64
		require.NoError(t, rows.Scan(&p, &g))
		gens[p] = g
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[int32]int64{0: t0.Generation + 1, 1: t1.Generation + 1}, gens)

	require.ErrorIs(t, checkInTx(ctx, t, s, t0), fence.ErrFenced)
	require.ErrorIs(t, checkInTx(ctx, t, s, t1), fence.ErrFenced)

	require.ErrorIs(t, fence.Register(ctx, s.Pool, topic, 2), fence.ErrPartitionCountChanged)
	_, err = fence.Take(ctx, s.Pool, topic, 0, 2, "old-size")
	require.ErrorIs(t, err, fence.ErrPartitionCountChanged)
	require.NoError(t, fence.Register(ctx, s.Pool, topic, 4))
	nt, err := fence.Take(ctx, s.Pool, topic, 3, 4, "new-size")
	require.NoError(t, err)
	require.NoError(t, checkInTx(ctx, t, s, nt))
}
