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

// startFetch numbers a fetch start as the processor does, right now.
func startFetch(t *testing.T, s *dbtest.Schema) projection.FetchStart {
	t.Helper()
	fs, err := projection.StartFetch(context.Background(), s.Pool)
	require.NoError(t, err)
	return fs
}

func writeFetched(t *testing.T, s *dbtest.Schema, status string, start projection.FetchStart) projection.Result {
	t.Helper()
	r := res("sub_fetched_order")
	var out projection.Result
	require.NoError(t, pgx.BeginFunc(context.Background(), s.Pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		projection.QueueFetchedResult(b, projection.Write{Resource: r, State: []byte(`{"status":"` + status + `"}`),
			Status: status, EventID: "ev_" + status, Generation: 1}, start, &out)
		return tx.SendBatch(context.Background(), b).Close()
	}))
	return out
}

// A fetched write whose fetch started before the projection's last fetched
// observation is refused (stale) and changes nothing; one that started
// later is written. Fails if the fetched write is unconditional.
func TestFetchedWriteOlderThanLastFetchIsStale(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	first, second := startFetch(t, s), startFetch(t, s)
	require.Equal(t, projection.Result{Outcome: projection.Fetched, Previous: ""}, writeFetched(t, s, "active", first))
	third := startFetch(t, s)
	require.Equal(t, projection.Result{Outcome: projection.Fetched, Previous: "active"}, writeFetched(t, s, "canceled", third))
	require.Equal(t, projection.Result{Outcome: projection.Stale, Previous: "canceled"}, writeFetched(t, s, "active", second))
	p, err := projection.Get(context.Background(), s.Pool, res("sub_fetched_order"))
	require.NoError(t, err)
	require.Equal(t, "canceled", p.Status)
	require.Equal(t, "ev_canceled", p.SourceEventID)
	require.Equal(t, projection.Result{Outcome: projection.Fetched, Previous: "canceled"}, writeFetched(t, s, "past_due", third), "the same fetch again: written")
}

// After a failover to a primary whose clock is behind, a fetch that started
// after the last written one reads an earlier wall-clock time. The order of
// fetch starts, not the clock, decides: the fresh fetch is written, and an
// older fetch still never overwrites a newer one, whatever the clocks say.
// The clock moved back is injected the way the processor passes a fetch
// start; its number comes from the database as in production.
func TestFreshFetchAfterClockMovedBackIsWritten(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	older := startFetch(t, s)
	before := startFetch(t, s)
	require.Equal(t, projection.Fetched, writeFetched(t, s, "active", before).Outcome)

	after := startFetch(t, s)
	after.At = before.At.Add(-time.Hour) // the new primary's clock is an hour behind
	require.Equal(t, projection.Result{Outcome: projection.Fetched, Previous: "active"}, writeFetched(t, s, "canceled", after))

	// The fetch that started first, however late its clock says it was.
	older.At = before.At.Add(time.Hour)
	require.Equal(t, projection.Result{Outcome: projection.Stale, Previous: "canceled"}, writeFetched(t, s, "active", older))
	p, err := projection.Get(context.Background(), s.Pool, res("sub_fetched_order"))
	require.NoError(t, err)
	require.Equal(t, "canceled", p.Status)
}
