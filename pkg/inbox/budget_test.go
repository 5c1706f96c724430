package inbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
)

// A replay (one event, dead ones by filter, a resource's events) starts the
// event's retry budget afresh: attempts 0, no failure run. A due retry keeps
// both, or the window would never end. Fails if a replay keeps the spent
// budget (a replayed dead event would die on its first failure).
func TestReplayStartsAFreshRetryBudgetAndARetryKeepsIt(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	insert(t, s.Pool, record("evt_dead", "sub_1"), record("evt_dead_filtered", "sub_2"), record("evt_resource", "sub_3"), record("evt_due", "sub_4"))
	failingSince := time.Now().Add(-80 * time.Hour).Truncate(time.Microsecond)
	exec(t, s.Pool, `DELETE FROM outbox`)
	exec(t, s.Pool, `UPDATE webhook_inbox SET status = 'dead', attempts = 40, last_error = 'provider down', first_failed_at = $1`, failingSince)
	exec(t, s.Pool, `UPDATE webhook_inbox SET status = 'retrying', next_attempt_at = now() - interval '1 second' WHERE event_id = 'evt_due'`)

	_, err := inbox.Replay(t.Context(), s.Pool, key("evt_dead"))
	require.NoError(t, err)
	_, err = inbox.ReplayDeadMatching(t.Context(), s.Pool, inbox.DeadFilter{ResourceID: "sub_2"})
	require.NoError(t, err)
	_, err = inbox.ReplayResource(t.Context(), s.Pool, endpoint.Provider, endpoint.SourceAccount, endpoint.Environment, "subscription", "sub_3", time.Time{})
	require.NoError(t, err)
	n, err := inbox.EnqueueDue(t.Context(), s.Pool, time.Now(), 10)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	for _, id := range []string{"evt_dead", "evt_dead_filtered", "evt_resource"} {
		row, err := inbox.Get(t.Context(), s.Pool, key(id), false)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusPending, row.Status, id)
		require.Zero(t, row.Attempts, "%s: a replay kept the spent attempts", id)
		require.Nil(t, row.FirstFailedAt, "%s: a replay kept the old retry window", id)
		require.NotNil(t, row.LastError, "%s: the last error stays for inspection", id)
	}
	due, err := inbox.Get(t.Context(), s.Pool, key("evt_due"), false)
	require.NoError(t, err)
	require.Equal(t, inbox.StatusPending, due.Status)
	require.Equal(t, 40, due.Attempts)
	require.NotNil(t, due.FirstFailedAt)
	require.True(t, failingSince.Equal(*due.FirstFailedAt))
}
