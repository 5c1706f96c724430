package reconciler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/internal/testkit/promread"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/pkg/retention"
	"github.com/hookyard/hookyard/pkg/topic"
	"github.com/hookyard/hookyard/reconciler"
)

func newReconciler(p *pipelinetest.Pipeline) *reconciler.Reconciler {
	return reconciler.New(p.Pool, p.Log, reconciler.Config{PageSize: 2, Registerer: prometheus.NewRegistry(),
		Sources: []provider.Source{{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount,
			Environment: "test", ResourceType: "subscription", Lister: p.Stripe}}})
}

// Subscriptions no webhook told us about reach their projection through the
// same outbox → Kafka → processor path; known, fresh ones are not re-checked.
func TestReconcilerFindsWhatNoWebhookToldUs(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	ctx := context.Background()
	for i := range 5 {
		p.Sim.Put(stripesim.Subscription{ID: fmt.Sprintf("sub_silent_%d", i), Customer: "cus", Status: []string{"active", "canceled"}[i%2]})
	}
	r := newReconciler(p)
	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 5, n)
	p.Eventually(func() bool {
		var n int
		return p.Pool.QueryRow(ctx, `SELECT count(*) FROM projection`).Scan(&n) == nil && n == 5
	}, "projections written")
	for i := range 5 {
		pr, ok := p.Projection(pipelinetest.Resource(fmt.Sprintf("sub_silent_%d", i)))
		require.True(t, ok)
		require.Equal(t, []string{"active", "canceled"}[i%2], pr.Status)
	}
	// Second round: every projection is fresh, nothing to check.
	n, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

// An event whose Kafka message was lost stays pending; the reconciler
// re-publishes it and it is processed once.
func TestReconcilerRepublishesStuckEvents(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	ctx := context.Background()
	p.Sim.Put(stripesim.Subscription{ID: "sub_stuck", Customer: "cus", Status: "active"})
	_, err := p.Pool.Exec(ctx, `
INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, resource_type, resource_id, payload, received_at)
VALUES ('stripe', $1, 'test', 'evt_lost', $2, 'customer.subscription.updated', 'subscription', 'sub_stuck',
        '{"id":"evt_lost","type":"customer.subscription.updated","data":{"object":{"id":"sub_stuck","object":"subscription"}}}', now() - interval '1 hour')`,
		pipelinetest.StripeAccount, pipelinetest.StripeEndpoint)
	require.NoError(t, err)
	n, err := reconciler.New(p.Pool, p.Log, reconciler.Config{StuckAfter: time.Minute, Registerer: prometheus.NewRegistry(),
		Progress: groupProgress(p)}).RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	p.WaitIdle()
	var status string
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT status FROM webhook_inbox WHERE event_id = 'evt_lost'`).Scan(&status))
	require.Equal(t, "processed", status)
	pr, ok := p.Projection(pipelinetest.Resource("sub_stuck"))
	require.True(t, ok)
	require.Equal(t, "active", pr.Status)
}

// With a payload retention, each round drops the payloads of finished events
// older than it; recent and pending events keep theirs. Fails if RunOnce
// stops purging.
func TestReconcilerPurgesPayloadsPastRetention(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{NoProcessor: true})
	ctx := context.Background()
	for _, ev := range []struct {
		id, status string
		age        string
	}{{"evt_old_done", "processed", "31 days"}, {"evt_new_done", "processed", "1 day"}, {"evt_old_pending", "pending", "40 days"}} {
		_, err := p.Pool.Exec(ctx, `
INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, payload, status, received_at)
VALUES ('stripe', $1, 'test', $2, $3, 'invoice.paid', '{"created": 1700000000}', $4, now() - $5::interval)`,
			pipelinetest.StripeAccount, ev.id, pipelinetest.StripeEndpoint, ev.status, ev.age)
		require.NoError(t, err)
	}
	reg := prometheus.NewRegistry()
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{Retention: &retention.Policy{PayloadAge: 30 * 24 * time.Hour, PartitionInterval: 24 * time.Hour, DeadPayloadAge: 14 * 24 * time.Hour, IdentityAge: 35 * 24 * time.Hour}, StuckAfter: 365 * 24 * time.Hour, Registerer: reg})
	_, err := r.RunOnce(ctx)
	require.NoError(t, err)
	kept := map[string]bool{}
	rows, err := p.Pool.Query(ctx, `SELECT event_id, payload IS NOT NULL FROM webhook_inbox`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var has bool
		require.NoError(t, rows.Scan(&id, &has))
		kept[id] = has
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]bool{"evt_old_done": false, "evt_new_done": true, "evt_old_pending": true}, kept)
	require.Equal(t, 1.0, counterValue(t, reg, "hookyard_inbox_payloads_purged_total"))
}

// groupProgress reads the pipeline's processor group on its topic.
func groupProgress(p *pipelinetest.Pipeline) topic.GroupProgress {
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka.Brokers...))
	require.NoError(p.T, err)
	p.T.Cleanup(cl.Close)
	return topic.GroupProgress{Client: cl, Topic: p.Kafka.Topic, Group: p.ProcessorConfig("any").Group}
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	v, found, err := promread.Sum(reg, name, nil)
	require.NoError(t, err)
	require.True(t, found, "metric %s not registered", name)
	return v
}
