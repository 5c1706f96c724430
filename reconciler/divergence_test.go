package reconciler_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/ops/explain"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/reconciler"
)

// A round counts what it found diverged from the provider: listed
// subscriptions without a projection (missing), listed with another status
// than their projection's (status) and projections parked on a version gap
// (parked). A fresh projection is no divergence, nor is a stale one it
// merely re-checks. Fails if the counter is removed or counts every check.
func TestReconcilerCountsDivergences(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{NoProcessor: true})
	ctx := context.Background()
	for _, id := range []string{"sub_fresh", "sub_old", "sub_new_1", "sub_new_2", "sub_diverged"} {
		p.Sim.Put(stripesim.Subscription{ID: id, Customer: "cus", Status: "active"})
	}
	_, err := p.Pool.Exec(ctx, `
INSERT INTO projection (provider, source_account, environment, resource_type, resource_id, state, status,
                                     fence_generation, observed_at, needs_reconcile)
VALUES ('stripe', $1, 'test', 'subscription', 'sub_fresh', '{}', 'active', 1, now(), false),
       ('stripe', $1, 'test', 'subscription', 'sub_old', '{}', 'active', 1, now() - interval '2 days', false),
       ('stripe', $1, 'test', 'subscription', 'sub_diverged', '{}', 'past_due', 1, now(), false),
       ('chargebee', 'site', 'test', 'subscription', 'sub_gap', '{}', 'active', 1, now(), true)`, pipelinetest.StripeAccount)
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{PageSize: 3, Registerer: reg,
		Sources: []provider.Source{{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount,
			Environment: "test", ResourceType: "subscription", Lister: p.Stripe}}})
	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 5, n, "sub_old, sub_new_1, sub_new_2, sub_diverged and the parked sub_gap")

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP hookyard_reconciler_divergences_total Divergences a reconcile round found, by provider and kind (missing: the provider lists a resource that has no projection; status, cancel_at_period_end, deleted: the provider lists another one than the projection's; state: an object without a status, a customer, lists other kept fields; parked: a projection was parked — version gap, conflict, unordered). Each is counted once while it lasts (a row of reconcile_divergence) and sent as a check.
# TYPE hookyard_reconciler_divergences_total counter
hookyard_reconciler_divergences_total{kind="missing",provider="stripe"} 2
hookyard_reconciler_divergences_total{kind="parked",provider="chargebee"} 1
hookyard_reconciler_divergences_total{kind="status",provider="stripe"} 1
`), "hookyard_reconciler_divergences_total"))
}

// A listed subscription that ends at its period's end while its projection
// says it renews, or that the projection says is deleted, is a divergence
// checked at once however fresh the projection is; one that lasts over
// several rounds is one row of reconcile_divergence and one increment, and
// is resolved when a listing sees the resource in sync. explain shows it.
// Fails if only the status is compared, or if a lasting divergence is
// counted once per round.
func TestLastingDivergenceIsOneRowCountedOnce(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{NoProcessor: true})
	ctx := context.Background()
	p.Sim.Put(stripesim.Subscription{ID: "sub_cape", Customer: "cus", Status: "active", CancelAtPeriodEnd: true})
	p.Sim.Put(stripesim.Subscription{ID: "sub_del", Customer: "cus", Status: "active"})
	_, err := p.Pool.Exec(ctx, `
INSERT INTO projection (provider, source_account, environment, resource_type, resource_id, state, status,
                                     deleted, fence_generation, observed_at)
VALUES ('stripe', $1, 'test', 'subscription', 'sub_cape', '{"cancel_at_period_end": false}', 'active', false, 1, now()),
       ('stripe', $1, 'test', 'subscription', 'sub_del', '{}', 'active', true, 1, now())`, pipelinetest.StripeAccount)
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: reg,
		Sources: []provider.Source{{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount,
			Environment: "test", ResourceType: "subscription", Lister: p.Stripe}}})
	for round := range 3 {
		rep, err := r.Round(ctx, reconciler.Filter{})
		require.NoError(t, err)
		require.EqualValues(t, 2, rep.Sources[0].Checks, "both are checked at once, every round while they last")
		if round > 0 {
			require.Zero(t, rep.Sources[0].Divergences, "round %d: no new divergence", round)
		}
	}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP hookyard_reconciler_divergences_total Divergences a reconcile round found, by provider and kind (missing: the provider lists a resource that has no projection; status, cancel_at_period_end, deleted: the provider lists another one than the projection's; state: an object without a status, a customer, lists other kept fields; parked: a projection was parked — version gap, conflict, unordered). Each is counted once while it lasts (a row of reconcile_divergence) and sent as a check.
# TYPE hookyard_reconciler_divergences_total counter
hookyard_reconciler_divergences_total{kind="cancel_at_period_end",provider="stripe"} 1
hookyard_reconciler_divergences_total{kind="deleted",provider="stripe"} 1
`), "hookyard_reconciler_divergences_total"))
	var rows int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM reconcile_divergence WHERE resolved_at IS NULL AND last_seen_at > first_seen_at`).Scan(&rows))
	require.Equal(t, 2, rows)

	_, err = p.Pool.Exec(ctx, `UPDATE projection SET state = '{"cancel_at_period_end": true}' WHERE resource_id = 'sub_cape'`)
	require.NoError(t, err)
	_, err = r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	tl, err := explain.Build(ctx, p.Pool, pipelinetest.Resource("sub_cape"), explain.Options{})
	require.NoError(t, err)
	require.Len(t, tl.Divergences, 1)
	d := tl.Divergences[0]
	require.Equal(t, "cancel_at_period_end", d.Kind)
	require.Equal(t, "false", *d.ProjectionSaid)
	require.Equal(t, "true", d.ProviderSaid)
	require.NotNil(t, d.ResolvedAt, "in sync again: resolved")
}
