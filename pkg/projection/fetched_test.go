package projection_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/projection"
)

// A fetched write whose fetch started before the projection's last fetched
// observation is refused (stale) and changes nothing; one that started at
// the same time or later is written. Fails if the fetched write is
// unconditional.
func TestFetchedWriteOlderThanLastFetchIsStale(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	r := res("sub_fetched_order")
	write := func(status string, at time.Time) projection.Result {
		t.Helper()
		var out projection.Result
		require.NoError(t, pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			projection.QueueFetchedResult(b, projection.Write{Resource: r, State: []byte(`{"status":"` + status + `"}`),
				Status: status, EventID: "ev_" + status, Generation: 1}, at, &out)
			return tx.SendBatch(ctx, b).Close()
		}))
		return out
	}
	t0 := time.Now().Truncate(time.Microsecond)
	require.Equal(t, projection.Result{Outcome: projection.Fetched, Previous: ""}, write("active", t0))
	require.Equal(t, projection.Result{Outcome: projection.Fetched, Previous: "active"}, write("canceled", t0.Add(time.Second)))
	require.Equal(t, projection.Result{Outcome: projection.Stale, Previous: "canceled"}, write("active", t0.Add(time.Millisecond)))
	p, err := projection.Get(ctx, s.Pool, r)
	require.NoError(t, err)
	require.Equal(t, "canceled", p.Status)
	require.Equal(t, "ev_canceled", p.SourceEventID)
	require.Equal(t, projection.Result{Outcome: projection.Fetched, Previous: "canceled"}, write("past_due", t0.Add(time.Second)), "same start: written")
}
