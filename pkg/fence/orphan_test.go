package fence_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/fence"
)

// deadHolder opens a connection of its own, begins a transaction, runs
// check in it (which takes the fence's FOR SHARE lock) and then does
// nothing more: no commit, no rollback, no close, as when the writer's host
// dies and no FIN reaches Postgres. The connection is closed only when the
// test ends.
func deadHolder(ctx context.Context, t *testing.T, s *dbtest.Schema, check func(pgx.Tx) error) {
	t.Helper()
	conn, err := pgx.ConnectConfig(ctx, s.Pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, check(tx))
}

// takenByFirstOwner is a schema whose one-partition topic's fence was
// taken once.
func takenByFirstOwner(t *testing.T) (*dbtest.Schema, fence.Token) {
	t.Helper()
	s := dbtest.New(t)
	ctx := context.Background()
	require.NoError(t, fence.Register(ctx, s.Pool, topic, 1))
	tok, err := fence.Take(ctx, s.Pool, topic, 0, 1, "first-owner")
	require.NoError(t, err)
	return s, tok
}

// A processor whose host died mid-transaction leaves its backend idle in
// transaction, holding the fence's FOR SHARE lock until TCP keepalive gives
// up (about two hours); the new owner's take would wait that long. Every
// transaction that takes the fence's lock bounds its own idle time, so the
// server ends the orphan and the new owner takes the fence within seconds.
func TestOrphanedFenceHolderDoesNotBlockTheNewOwner(t *testing.T) {
	t.Parallel()
	for name, check := range map[string]func(context.Context, pgx.Tx, fence.Token) error{
		"Check": func(ctx context.Context, tx pgx.Tx, tok fence.Token) error { return fence.Check(ctx, tx, tok) },
		"QueueCheck": func(ctx context.Context, tx pgx.Tx, tok fence.Token) error {
			b := &pgx.Batch{}
			fence.QueueCheck(b, tok)
			return tx.SendBatch(ctx, b).Close()
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, old := takenByFirstOwner(t)
			deadHolder(ctx, t, s, func(tx pgx.Tx) error { return check(ctx, tx, old) })

			// A liveness bound far above the orphan's idle limit: without
			// one, this take waits for TCP keepalive.
			tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			var cur fence.Token
			var err error
			for {
				cur, err = fence.Take(tctx, s.Pool, topic, 0, 1, "new-owner")
				if err == nil || tctx.Err() != nil {
					break
				}
				require.ErrorIs(t, err, fence.ErrBusy, "only a lock wait may fail a take here")
			}
			require.NoError(t, err, "the new owner never took the fence")
			require.Equal(t, old.Generation+1, cur.Generation)
		})
	}
}

// A take that waits behind a lock it cannot get gives up after
// TakeLockTimeout with ErrBusy, so the caller can log, retry and stay
// responsive, instead of hanging in the assign callback with the group's
// rebalance behind it.
func TestTakeBehindAHeldLockGivesUpWithErrBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := takenByFirstOwner(t)
	// A live holder that sets no bounds of its own and keeps its lock for
	// the whole test.
	deadHolder(ctx, t, s, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT 1 FROM partition_fence FOR SHARE`)
		return err
	})
	tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err := fence.Take(tctx, s.Pool, topic, 0, 1, "b")
	require.ErrorIs(t, err, fence.ErrBusy)
	require.NoError(t, tctx.Err(), "the take waited for its caller's deadline, not its own bound")
}
