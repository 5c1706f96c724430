package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/projection"
)

// seedParked stores two parked projections (a conflict on Chargebee, a gap
// on a Standard Webhooks sender) and one that is not parked.
func seedParked(t *testing.T, e *cliEnv) {
	t.Helper()
	_, err := e.schema.Pool.Exec(t.Context(), `
INSERT INTO projection (provider, source_account, environment, resource_type, resource_id, provider_version, state, status,
                                     fence_generation, needs_reconcile, needs_reconcile_reason, parked_at, reconcile_checked_at)
VALUES ('chargebee', 'site', 'test', 'subscription', 'sub_conf', 9, '{}', 'active', 1, true,
        'version conflict: another snapshot of v9 (event ev_b) differs; first one kept', now() - interval '2 hours', now() - interval '1 hour'),
       ('standard-webhooks', 'sender', 'test', 'subscription', 'sub_gap', 3, '{}', 'active', 1, true,
        'version gap: v5 does not follow v3', now() - interval '1 hour', NULL),
       ('chargebee', 'site', 'test', 'subscription', 'sub_fine', 4, '{}', 'active', 1, false, NULL, NULL, NULL)`)
	require.NoError(t, err)
}

type parkedList struct {
	Parked []projection.Projection `json:"parked"`
	Count  int                     `json:"count"`
}

// `hookyard parked list` shows what waits for reconciliation and why —
// including what a check could not resolve — oldest parking first, with the
// dead list's filters. Fails if parked projections are not listed, lose
// their reason, or the filters are ignored.
func TestParkedListShowsParkedProjectionsAndWhy(t *testing.T) {
	e := newCLIEnv(t, nil)
	seedParked(t, e)

	var all parkedList
	e.runJSON(&all, "parked", "list")
	require.Equal(t, 2, all.Count)
	require.Len(t, all.Parked, 2)
	require.Equal(t, "sub_conf", all.Parked[0].Resource.ID, "oldest parking first")
	require.Contains(t, all.Parked[0].NeedsReconcileReason, "version conflict")
	require.NotNil(t, all.Parked[0].ReconcileCheckedAt, "a check was sent and could not resolve it")
	require.Equal(t, "sub_gap", all.Parked[1].Resource.ID)
	require.Nil(t, all.Parked[1].ReconcileCheckedAt)

	var cb parkedList
	e.runJSON(&cb, "parked", "list", "-provider", "chargebee", "-limit", "10")
	require.Equal(t, 1, cb.Count)
	require.Equal(t, "sub_conf", cb.Parked[0].Resource.ID)

	var none parkedList
	e.runJSON(&none, "parked", "list", "-account", "nobody")
	require.Zero(t, none.Count)
	require.NotNil(t, none.Parked, "an empty list, not null")

	code, _, _ := e.run("parked", "list", "-limit", "0")
	require.Equal(t, 2, code)
	code, _, _ = e.run("parked")
	require.Equal(t, 2, code)
}
