package reconciler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/pkg/provider/github/githubsim"
	"github.com/hookyard/hookyard/reconciler"
)

const ghSecret = "gh-test-secret"

func githubPipeline(t *testing.T) (*pipelinetest.Pipeline, *githubsim.Sim, provider.Source) {
	return githubPipelineWith(t, githubsim.Config{})
}

// githubPipelineWith is githubPipeline with the simulated hook's settings
// (an App's hook: AppID; GitHub's clock: Now); wrap (if not nil) stands
// between the reconciler and GitHub's API.
func githubPipelineWith(t *testing.T, cfg githubsim.Config, wrap ...func(http.Handler) http.Handler) (*pipelinetest.Pipeline, *githubsim.Sim, provider.Source) {
	t.Helper()
	p := pipelinetest.New(t, pipelinetest.Options{Endpoints: []provider.Endpoint{{ID: "github-test", Provider: provider.GitHub,
		SourceAccount: "gh-org", Environment: "prod", Secrets: []string{ghSecret}}}})
	cfg.WebhookURL, cfg.Secret = p.Receiver.URL+"/webhooks/github-test", ghSecret
	sim := githubsim.New(cfg)
	var h http.Handler = sim
	for _, w := range wrap {
		h = w(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client, err := github.NewClient(github.APIConfig{BaseURL: srv.URL, RatePerSecond: 1000, Burst: 100}, sim.Hook(), p.Log)
	require.NoError(t, err)
	return p, sim, provider.Source{Provider: provider.GitHub, SourceAccount: "gh-org", Environment: "prod",
		Hooks: github.Deliveries{Client: client}}
}

// GitHub never redelivers on its own: a delivery that got no 2xx is found
// in the hook's deliveries and redelivered, under its own guid, once —
// overlapping rounds see the failed attempt again and do not ask again, and
// a delivery that arrived is never asked for. Fails if the reconciler asks
// once per round while the failed attempt stays listed, or never asks.
func TestLostGitHubDeliveryIsRedeliveredOnce(t *testing.T) {
	t.Parallel()
	t.Run("repository hook", func(t *testing.T) { t.Parallel(); lostDeliveryRedeliveredOnce(t, githubsim.Config{}) })
	// An App's webhook: listed at /app/hook/deliveries with the App's
	// signed token.
	t.Run("app hook", func(t *testing.T) { t.Parallel(); lostDeliveryRedeliveredOnce(t, githubsim.Config{AppID: "4242"}) })
}

func lostDeliveryRedeliveredOnce(t *testing.T, cfg githubsim.Config) {
	p, sim, src := githubPipelineWith(t, cfg)
	ctx := context.Background()
	payload := map[string]any{"action": "opened", "repository": map[string]any{"id": 1296269, "full_name": "gh-org/repo"}}
	okGUID, status, err := sim.Send(ctx, "issues", payload)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	sim.SetDown(true)
	lostGUID, status, err := sim.Send(ctx, "issues", payload)
	require.NoError(t, err)
	require.Zero(t, status, "the receiver was never reached")
	sim.SetDown(false)

	r := reconciler.New(p.Pool, p.Log, reconciler.Config{PageSize: 1, Registerer: prometheus.NewRegistry(),
		Sources: []provider.Source{src}})
	for range 3 {
		rep, err := r.Round(ctx, reconciler.Filter{})
		require.NoError(t, err)
		require.True(t, rep.Sources[0].Listings[0].Complete)
		sim.Wait()
	}
	require.Equal(t, 1, sim.Redeliveries(lostGUID))
	require.Zero(t, sim.Redeliveries(okGUID))
	var rows int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE provider = 'github' AND event_id = $1`, lostGUID).Scan(&rows))
	require.Equal(t, 1, rows, "the redelivery arrived under the original guid")
}

// A redelivery that fails too is asked for again only after
// RedeliverAgainAfter, not every round. Fails if the reservation is not
// kept while the event is still missing.
func TestFailedRedeliveryIsNotAskedAgainEveryRound(t *testing.T) {
	t.Parallel()
	p, sim, src := githubPipeline(t)
	ctx := context.Background()
	sim.SetDown(true)
	lostGUID, _, err := sim.Send(ctx, "push", map[string]any{"repository": map[string]any{"id": 1296269, "full_name": "gh-org/repo"}})
	require.NoError(t, err)
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: prometheus.NewRegistry(), Sources: []provider.Source{src}})
	for range 3 {
		_, err := r.Round(ctx, reconciler.Filter{})
		require.NoError(t, err)
		sim.Wait()
	}
	require.Equal(t, 1, sim.Redeliveries(lostGUID))
}
