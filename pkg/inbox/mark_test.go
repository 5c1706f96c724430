package inbox_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
)

// A mark that meets a row another transaction is updating waits for it,
// then decides on the row as that transaction left it: still pending (its
// attempts changed, say), the mark applies to the new version; no longer
// pending (an operator marked it dead), the mark leaves it alone.
func TestMarkDecidesOnTheRowAsAConcurrentUpdateLeftIt(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	insert(t, s.Pool, record("evt_touched", "sub_1"), record("evt_killed", "sub_2"))
	for _, tc := range []struct {
		id, update, want string
	}{
		{"evt_touched", `UPDATE webhook_inbox SET attempts = attempts + 5 WHERE event_id = 'evt_touched'`, inbox.StatusProcessed},
		{"evt_killed", `UPDATE webhook_inbox SET status = 'dead' WHERE event_id = 'evt_killed'`, inbox.StatusDead},
	} {
		other, err := s.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = other.Exec(ctx, tc.update)
		require.NoError(t, err)
		var otherPID int
		require.NoError(t, other.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&otherPID))

		done := make(chan error, 1)
		go func() {
			done <- pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
				b := &pgx.Batch{}
				inbox.QueueMarks(b, []inbox.Mark{{Key: key(tc.id), Status: inbox.StatusProcessed, Outcome: "applied", Attempts: 1}})
				return tx.SendBatch(ctx, b).Close()
			})
		}()
		// The mark waits for the other transaction's row lock.
		require.Eventually(t, func() bool {
			var waiting bool
			require.NoError(t, s.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
				WHERE $1::int = ANY (pg_blocking_pids(pid)))`, otherPID).Scan(&waiting))
			return waiting
		}, 10*time.Second, 10*time.Millisecond, "the mark waits for the row")
		require.NoError(t, other.Commit(ctx))
		require.NoError(t, <-done)

		var status string
		var attempts int
		require.NoError(t, s.Pool.QueryRow(ctx, `SELECT status, attempts FROM webhook_inbox WHERE event_id = $1`, tc.id).Scan(&status, &attempts))
		require.Equal(t, tc.want, status, tc.id)
		if tc.want == inbox.StatusProcessed {
			require.Equal(t, 1, attempts, "the mark's values on the new version")
		}
	}
}
