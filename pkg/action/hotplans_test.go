package action

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// The processor records actions in every batch that has some; the insert
// reads nothing but its conflict arbiter, whatever the statistics.
func TestHotStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	p, a, e, id := plantest.PendingKeys(1)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "record an action", SQL: recordSQL, Args: []any{p[0], a[0], e[0], "inv_new", "receipt", id[0], (*string)(nil), (*string)(nil)},
			Reads: []string{}},
		{Name: "record a transition's action with its body", SQL: recordSQL, Args: []any{p[0], a[0], e[0], "subscription/sub_1@v3",
			"subscription_canceled", id[0], (*string)(nil), `{"to":"canceled"}`}, Reads: []string{}},
		{Name: "record a subscriber's change in its stream", SQL: recordOrderedSQL, Args: []any{p[0], a[0], e[0], "subscription/sub_1@v3",
			"change:billing", id[0], (*string)(nil), `{"status":"active"}`, "subscription/sub_1"}, Reads: []string{}},
		forgetDeliveriesCase(),
	})
}

// forgetDeliveriesCase is the retention pass's delete of settled
// deliveries: a walk of action_delivery_done, one probe of
// action_order_open per candidate, the delete by the locked ctids.
func forgetDeliveriesCase() plantest.Case {
	return plantest.Case{Name: "forget settled deliveries", SQL: forgetDeliveriesSQL, Args: []any{time.Now().Add(-30 * 24 * time.Hour), 1000},
		Reads: []string{"Tid Scan on action", "action_delivery_done", "action_order_open"}}
}

// The retention of deliveries on 300,000 of them (most sent before the
// horizon, the rest in flight or recent, 3,000 resources), without
// statistics and analyzed: it walks action_delivery_done and probes
// action_order_open, never a sequential scan of the table or a sort.
// Fails if the walk's index stops serving its order (a sort), or the probe
// its stream.
func TestForgetDeliveriesPlanWalksTheSettledIndexAtVolume(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	_, err := s.Pool.Exec(ctx, `ALTER TABLE action SET (autovacuum_enabled = false);
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status, done_at, body, order_key, order_seq)
SELECT 'stripe', 'acct', 'test', 'subscription/sub_' || (i % 3000) || '@v' || i, 'change:billing', 'evt_' || i,
       CASE WHEN i > 295000 THEN 'pending' WHEN i % 997 = 0 THEN 'dead' ELSE 'sent' END,
       CASE WHEN i <= 295000 THEN now() - interval '60 days' + i * interval '10 seconds' END, '{}',
       'subscription/sub_' || (i % 3000), nextval('action_order_seq')
FROM generate_series(1, 300000) i`)
	require.NoError(t, err)
	// The walk is the index's order: a plan that reads the index whole
	// and sorts it (a bitmap scan) reads every settled delivery per pass.
	walks := func() {
		conn, err := s.Pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		c := forgetDeliveriesCase()
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			_, plan := plantest.Reads(t, conn.Conn(), mode, c.SQL, c.Args...)
			require.Contains(t, plan, "Index Scan using action_delivery_done on action a", plan)
			require.NotContains(t, plan, "Sort", plan)
			require.NotContains(t, plan, "Bitmap", plan)
		}
	}
	plantest.RequireNoStatistics(t, s.Pool)
	plantest.Check(t, s.Pool, false, []plantest.Case{forgetDeliveriesCase()})
	walks()
	_, err = s.Pool.Exec(ctx, `ANALYZE action`)
	require.NoError(t, err)
	plantest.Check(t, s.Pool, true, []plantest.Case{forgetDeliveriesCase()})
	walks()
}
