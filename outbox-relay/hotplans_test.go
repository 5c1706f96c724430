package outboxrelay

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// A claim reads the outbox by its primary key only, whatever the statistics:
// a plan that joins the claimed ids back with a hash over the whole outbox
// reads every waiting row for each batch, so the relay slows down exactly
// when the backlog is largest. A claimed change row asks whether an earlier
// row of its key waits elsewhere with one probe of outbox_topic_key, never
// a scan of the change rows.
func TestHotStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "claim a batch", SQL: claimSQL, Args: []any{BatchSizeDefault},
			Reads: []string{"outbox_pkey", "outbox_topic_key"}},
	})
}

// The outbox is a queue: autovacuum analyzes it when its rows were just
// published (its pages there, no live row), and traffic then fills it. On those statistics, the probe each claimed
// change row makes for an earlier row of its key must still be one probe of
// outbox_topic_key (an index or bitmap scan of the key's entries), and the claim must never scan the outbox: a bitmap scan
// of every id below the row (what the planner took) reads the whole waiting
// outbox once per change row. The plans are taken in a transaction set up
// as the relay sets up its claims (claimPlanSQL), custom and generic. Fails
// when the probe's id comparison is one the primary key can serve.
func TestClaimProbesEachChangeRowsKeyOnAnOutboxAnalyzedEmpty(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	_, err := s.Pool.Exec(ctx, `ALTER TABLE outbox SET (autovacuum_enabled = false)`)
	require.NoError(t, err)
	// A queue after a burst: its pages are there, its rows were all
	// published (deleted, not yet vacuumed) when it was analyzed.
	for _, q := range []string{
		`INSERT INTO outbox (message_key, message) SELECT 'k' || g, '{}' FROM generate_series(1, 200000) g`,
		`DELETE FROM outbox`,
		`ANALYZE outbox`,
	} {
		_, err = s.Pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	conn, err := s.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	check := func(t *testing.T, mode string) {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, claimPlanSQL, pgx.QueryExecModeSimpleProtocol, "10s")
		require.NoError(t, err)
		_, plan := plantest.Reads(t, conn.Conn(), mode, claimSQL, BatchSizeDefault)
		require.NotContains(t, plan, "Seq Scan", "plan:\n%s", plan)
		sub := plan[strings.Index(plan, "SubPlan"):]
		require.Contains(t, sub, "outbox_topic_key", "plan:\n%s", plan)
		require.NotContains(t, sub, "outbox_pkey", "the probe reads ids below the row; plan:\n%s", plan)
	}
	modes := []string{"force_custom_plan", "force_generic_plan"}
	// The relay's next claim finds it empty (a notification, a poll).
	for _, mode := range modes {
		t.Run("empty/"+mode, func(t *testing.T) { check(t, mode) })
	}
	// Then 20,000 change rows of 2,000 resources, and as many event rows.
	_, err = s.Pool.Exec(ctx, `INSERT INTO outbox (message_key, message, topic)
SELECT 'chargebee/site/test/subscription/sub_' || (g % 2000), '{}', CASE WHEN g % 2 = 0 THEN 'hookyard.changes' END
FROM generate_series(1, 40000) g`)
	require.NoError(t, err)
	for _, mode := range modes {
		t.Run("filled/"+mode, func(t *testing.T) { check(t, mode) })
	}
}
