package reconciler_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/chargebee/chargebeesim"
	"github.com/hookyard/hookyard/pkg/provider/github/githubsim"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/reconciler"
)

// leaveCursor records a walk interrupted long ago at cursor, as
// reconcile_checkpoint keeps it.
func leaveCursor(t *testing.T, p *pipelinetest.Pipeline, source, listing, cursor string) {
	t.Helper()
	_, err := p.Pool.Exec(context.Background(),
		`INSERT INTO reconcile_checkpoint (source, listing, cursor, last_error) VALUES ($1, $2, $3, 'interrupted')`, source, listing, cursor)
	require.NoError(t, err)
}

// A walk interrupted for longer than the provider keeps its cursor resumes
// at a cursor the provider no longer knows. Every walk (Stripe's
// subscriptions, Chargebee's events, GitHub's deliveries) walks again from
// its start and completes. Fails if a walk retries the unknown cursor
// every round and never completes.
func TestEveryWalkRecoversFromACursorTheProviderNoLongerKnows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("stripe subscriptions", func(t *testing.T) {
		t.Parallel()
		p := pipelinetest.New(t, pipelinetest.Options{NoProcessor: true})
		p.Sim.Put(stripesim.Subscription{ID: "sub_listed", Customer: "cus", Status: "active", Created: time.Now().Unix()})
		client := stripe.NewClient(stripe.APIConfig{BaseURL: p.SimServer.URL, APIKey: stripesim.DevAPIKey, RatePerSecond: 1000, Burst: 1000}, p.Log)
		src := provider.Source{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount, Environment: "test",
			ResourceType: "subscription", Lister: client}
		// A subscription deleted in test mode no longer exists: Stripe
		// answers 400 resource_missing (https://docs.stripe.com/api/pagination).
		leaveCursor(t, p, src.Name(), "subscriptions", "sub_deleted_since")
		r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: prometheus.NewRegistry(), Sources: []provider.Source{src}})
		rep, err := r.Round(ctx, reconciler.Filter{})
		require.NoError(t, err)
		require.True(t, rep.Sources[0].Listings[0].Complete)
		require.EqualValues(t, 1, rep.Sources[0].Checks, "the walk from the start saw sub_listed")
	})

	t.Run("chargebee events", func(t *testing.T) {
		t.Parallel()
		ep := provider.Endpoint{ID: "chargebee-test", Provider: provider.Chargebee, SourceAccount: "cb-site", Environment: "test",
			Secrets: []string{"hook:pass"}}
		p := pipelinetest.New(t, pipelinetest.Options{Endpoints: []provider.Endpoint{ep}, NoProcessor: true})
		sim := chargebeesim.New(chargebeesim.Config{})
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		_, _, err := sim.PutSubscription(ctx, "cb_sub", "active")
		require.NoError(t, err)
		client, err := chargebee.NewClient(chargebee.APIConfig{Site: srv.URL, APIKey: chargebeesim.DevAPIKey, RatePerSecond: 1000, Burst: 100}, p.Log)
		require.NoError(t, err)
		src := provider.Source{Provider: provider.Chargebee, SourceAccount: "cb-site", Environment: "test",
			Endpoint: &p.Endpoints[1], Events: chargebee.Events{Client: client}, Identify: chargebee.Verifier{}}
		since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		leaveCursor(t, p, src.Name(), reconciler.ListingEvents, `{"since":"`+since+`","cursor":"{\"t\":1700000000,\"s\":999999}"}`)
		r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: prometheus.NewRegistry(), Sources: []provider.Source{src}})
		rep, err := r.Round(ctx, reconciler.Filter{})
		require.NoError(t, err)
		require.True(t, rep.Sources[0].Listings[0].Complete)
		require.EqualValues(t, 1, rep.Sources[0].EventsIngested)
	})

	t.Run("github deliveries", func(t *testing.T) {
		t.Parallel()
		p, sim, src := githubPipelineWith(t, githubsim.Config{})
		sim.SetDown(true)
		g, _, err := sim.Send(ctx, "push", pushPayload)
		require.NoError(t, err)
		sim.SetDown(false)
		since := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
		leaveCursor(t, p, src.Name(), reconciler.ListingDeliveries, `{"since":"`+since+`","cursor":"12345"}`)
		r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: prometheus.NewRegistry(), Sources: []provider.Source{src}})
		rep, err := r.Round(ctx, reconciler.Filter{})
		require.NoError(t, err)
		require.True(t, rep.Sources[0].Listings[0].Complete)
		sim.Wait()
		require.Equal(t, 1, sim.Redeliveries(g))
	})
}
