package reconciler_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/reconciler"
)

// A subscription canceled at Stripe whose webhook never arrived: the
// projection still says active, and is fresh. The reconciler lists with
// status=all, sees "canceled" where the projection says "active", and checks
// it; access closes. Fails if the list is asked without status=all (Stripe,
// and the simulator, leave canceled subscriptions out) or if the reconciler
// only checks listed resources that have no projection.
func TestReconcilerFindsCancellationWhoseWebhookNeverArrived(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	sub := stripesim.Subscription{ID: "sub_lost_cancel", Customer: "cus", Status: "active", CurrentPeriodEnd: time.Now().Add(time.Hour).Unix()}
	p.Sim.Put(sub)
	sub, _ = p.Sim.Get(sub.ID)
	_, status, err := p.Sim.Send(t.Context(), "customer.subscription.created", sub)
	require.NoError(t, err)
	require.Equal(t, 200, status)
	p.Eventually(func() bool { d, _ := p.Access(sub.ID); return d.Access }, "access opens")

	// Canceled at Stripe; the customer.subscription.deleted webhook is lost.
	sub.Status, sub.CanceledAt = "canceled", time.Now().Unix()
	p.Sim.Put(sub)

	n, err := newReconciler(p).RunOnce(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	p.Eventually(func() bool { d, _ := p.Access(sub.ID); return !d.Access && d.Reason == "canceled" }, "access closes")
}

// emptyLister lists nothing, as a provider list that no longer shows a
// resource (or one asked without status=all) would.
type emptyLister struct{}

func (emptyLister) ListObjects(context.Context, string, string, string, int) ([]provider.Listed, bool, error) {
	return nil, false, nil
}

// Projections not observed for StaleAfter are re-checked from the database,
// whatever the provider's list shows, unless they are terminal (canceled,
// deleted) or belong to no source. Fails if the reconciler chooses what to
// check only from the list.
func TestReconcilerRechecksStaleProjectionsFromTheDatabase(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	ctx := context.Background()
	p.Sim.Put(stripesim.Subscription{ID: "sub_stale", Customer: "cus", Status: "canceled", CanceledAt: time.Now().Unix()})
	_, err := p.Pool.Exec(ctx, `
INSERT INTO projection (provider, source_account, environment, resource_type, resource_id, state, status,
                                     deleted, fence_generation, observed_at)
VALUES ('stripe', $1, 'test', 'subscription', 'sub_stale', '{}', 'active', false, 0, now() - interval '2 days'),
       ('stripe', $1, 'test', 'subscription', 'sub_fresh', '{}', 'active', false, 0, now()),
       ('stripe', $1, 'test', 'subscription', 'sub_old_canceled', '{}', 'canceled', false, 0, now() - interval '2 days'),
       ('stripe', $1, 'test', 'subscription', 'sub_old_expired', '{}', 'incomplete_expired', false, 0, now() - interval '2 days'),
       ('stripe', $1, 'test', 'subscription', 'sub_old_deleted', '{}', NULL, true, 0, now() - interval '2 days'),
       ('stripe', 'acct_nosource', 'test', 'subscription', 'sub_other', '{}', 'active', false, 0, now() - interval '2 days'),
       ('stripe', $1, 'live', 'subscription', 'sub_other_env', '{}', 'active', false, 0, now() - interval '2 days')`,
		pipelinetest.StripeAccount)
	require.NoError(t, err)

	r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: prometheus.NewRegistry(),
		Sources: []provider.Source{{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount, Environment: "test",
			ResourceType: "subscription", Terminal: []string{"canceled", "incomplete_expired"}, Lister: emptyLister{}}}})
	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "only sub_stale")
	p.Eventually(func() bool {
		pr, ok := p.Projection(pipelinetest.Resource("sub_stale"))
		return ok && pr.Status == "canceled"
	}, "the stale projection is checked and corrected")
}
