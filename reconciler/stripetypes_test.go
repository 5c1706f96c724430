package reconciler_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
	"github.com/hookyard/hookyard/reconciler"
)

// stripeTypes is a pipeline whose Stripe endpoint projects subscriptions,
// customers and invoices and keeps a customer's metadata.tier, and the
// reconciler of that endpoint's Stripe source as the Stripe adapter builds
// it, without its events scan: what it finds, its listings find.
func stripeTypes(t *testing.T) (*pipelinetest.Pipeline, *reconciler.Reconciler) {
	t.Helper()
	fields := []string{"metadata.tier"}
	p := pipelinetest.New(t, pipelinetest.Options{StripeProject: []string{"subscription", "customer", "invoice"},
		Processor: func(c *processor.Config) { c.StateFields = fields }})
	conn, err := stripe.Provider{}.Connect(p.Endpoints[:1], provider.APIOptions{BaseURL: p.SimServer.URL, APIKey: stripesim.DevAPIKey,
		ReconcileRate: 1000, Log: p.Log})
	require.NoError(t, err)
	src, err := conn.Source(&p.Endpoints[0])
	require.NoError(t, err)
	require.NotNil(t, src)
	src.Events = nil
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{PageSize: 2, Registerer: prometheus.NewRegistry(),
		StateFields: fields, Sources: []provider.Source{*src}})
	return p, r
}

func stripeRes(typ, id string) message.Resource {
	return message.Resource{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount, Environment: "test", Type: typ, ID: id}
}

func tierOf(t *testing.T, state []byte) string {
	t.Helper()
	var s struct {
		Metadata struct {
			Tier string `json:"tier"`
		} `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal(state, &s))
	return s.Metadata.Tier
}

// A customer changed at Stripe with no webhook (its status, which
// customers do not have, cannot say so: only its kept state does), and an
// invoice no webhook ever named: one reconcile round lists customers and
// invoices (GET /v1/customers, GET /v1/invoices, beside subscriptions),
// and sends what differs down the same outbox → processor path, which
// corrects the customer and projects the invoice; the divergence is
// recorded as a state one. Fails if the reconciler lists subscriptions
// only, or compares a listed customer by status and deletion alone.
func TestReconcileRoundCorrectsACustomerChangedWithoutAWebhook(t *testing.T) {
	t.Parallel()
	p, r := stripeTypes(t)
	ctx := context.Background()
	cus := func(id, tier string) map[string]any {
		return map[string]any{"id": id, "email": "jenny@example.com", "metadata": map[string]any{"tier": tier}}
	}
	id := p.Sim.PutObject("customer", cus("", "free"))
	_, code, err := p.Sim.Send(ctx, "customer.created", map[string]any{"id": id, "object": "customer"})
	require.NoError(t, err)
	require.Equal(t, 200, code)
	p.WaitIdle()
	pr, ok := p.Projection(stripeRes("customer", id))
	require.True(t, ok)
	require.Equal(t, "free", tierOf(t, pr.State))

	// Upgraded at Stripe; customer.updated never arrives. An invoice is
	// created and paid with no webhook at all.
	p.Sim.PutObject("customer", cus(id, "pro"))
	in := p.Sim.PutObject("invoice", map[string]any{"customer": id, "status": "paid", "amount_paid": 900})

	_, err = r.RunOnce(ctx)
	require.NoError(t, err)
	p.Eventually(func() bool {
		pr, ok := p.Projection(stripeRes("customer", id))
		return ok && tierOf(t, pr.State) == "pro"
	}, "the customer corrected by the round")
	p.Eventually(func() bool {
		pr, ok := p.Projection(stripeRes("invoice", in))
		return ok && pr.Status == "paid"
	}, "the invoice projected by the round")
	var kind string
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT kind FROM reconcile_divergence WHERE resource_type = 'customer' AND resource_id = $1`, id).Scan(&kind))
	require.Equal(t, reconciler.KindState, kind)

	// In sync now: a second round sends nothing for them.
	p.WaitIdle()
	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

// Stripe's customer list leaves deleted customers out, so no listing says
// one was deleted. A customer deleted with no webhook is found by the
// stale check, which fetches every customer projection not observed for
// reconciler.stale_after, listed or not: GET /v1/customers/{id} answers
// "deleted": true, and the projection becomes a tombstone. Fails if the
// stale check does not cover customers, or if only listed customers are
// checked.
func TestCustomerDeletedWithoutAWebhookIsFoundThoughTheListOmitsIt(t *testing.T) {
	t.Parallel()
	p, r := stripeTypes(t)
	ctx := context.Background()
	id := p.Sim.PutObject("customer", map[string]any{"metadata": map[string]any{"tier": "free"}})
	_, code, err := p.Sim.Send(ctx, "customer.created", map[string]any{"id": id, "object": "customer"})
	require.NoError(t, err)
	require.Equal(t, 200, code)
	p.WaitIdle()

	require.True(t, p.Sim.DeleteCustomer(id)) // customer.deleted never arrives
	items, _, err := p.Stripe.ListObjects(ctx, "", "customer", "", 100)
	require.NoError(t, err)
	require.Empty(t, items, "Stripe's list shows no deleted customer")

	// A day later: the projection was not observed since.
	_, err = p.Pool.Exec(ctx, `UPDATE projection SET observed_at = now() - interval '2 days' WHERE resource_id = $1`, id)
	require.NoError(t, err)
	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	p.Eventually(func() bool {
		pr, ok := p.Projection(stripeRes("customer", id))
		return ok && pr.Deleted
	}, "the deleted customer becomes a tombstone")
}
