package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/db"
)

// A pool opened with IdleInTransactionTimeout and LockTimeout has every
// connection bounded: a transaction left open by a caller that went away
// (its host died, no FIN reached Postgres) is ended by the server and its
// locks released, instead of living until TCP keepalive gives up.
func TestPoolEndsTransactionsLeftIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.Open(ctx, dbtest.URL(), db.Options{MaxConns: 2, IdleInTransactionTimeout: 200 * time.Millisecond, LockTimeout: 3 * time.Second})
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	var lockTimeout string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('lock_timeout')`).Scan(&lockTimeout))
	require.Equal(t, "3s", lockTimeout)

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var pid int
	_, err = conn.Exec(ctx, `BEGIN`)
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	// The orphan: nothing more is sent on conn. The server must end it.
	deadline := time.Now().Add(time.Minute)
	for {
		var alive bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive))
		if !alive {
			break
		}
		require.True(t, time.Now().Before(deadline), "the idle transaction of backend %d was never ended", pid)
		time.Sleep(50 * time.Millisecond)
	}
}
