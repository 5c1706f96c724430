package projection

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// The console's overview counts parked projections through the partial
// index of parked ones, and recent divergences through
// reconcile_divergence_seen, on large tables with or without statistics:
// neither count may read every projection or every divergence ever
// recorded. Fails without migration 00020's index.
func TestOverviewCountsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	// Divergences of 100,000 resources, all seen long ago but the last 100.
	_, err := s.Pool.Exec(t.Context(), `ALTER TABLE reconcile_divergence SET (autovacuum_enabled = false);
INSERT INTO reconcile_divergence (provider, source_account, environment, resource_type, resource_id, kind, provider_says,
    first_seen_at, last_seen_at)
SELECT 'chargebee', 'dev-site', 'test', 'subscription', 'sub_' || g, 'status', 'active',
       now() - interval '30 days', now() - CASE WHEN g > 99900 THEN interval '1 hour' ELSE interval '30 days' END
FROM generate_series(1, 100000) g`)
	require.NoError(t, err)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "count parked projections", SQL: countParkedSQL, Reads: []string{"projection_parked"}},
		{Name: "count divergences in 24 h", SQL: countDivergencesSQL, Args: []any{time.Now().Add(-24 * time.Hour)},
			Reads: []string{"reconcile_divergence_seen"}},
	})
}
