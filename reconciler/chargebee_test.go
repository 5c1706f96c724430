package reconciler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/chargebee/chargebeesim"
	"github.com/hookyard/hookyard/reconciler"
)

// A Chargebee cancellation whose webhook never came is found by the events
// scan (offset paging, oldest first) and applied as the versioned snapshot
// it carries; a second, overlapping scan ingests nothing. Fails if the scan
// does not follow next_offset (the last page is never read) or ingests an
// event twice.
func TestChargebeeEventWhoseWebhookWasLostIsIngestedOnce(t *testing.T) {
	t.Parallel()
	ep := provider.Endpoint{ID: "chargebee-test", Provider: provider.Chargebee, SourceAccount: "cb-site", Environment: "test",
		Secrets: []string{"hook:pass"}}
	p := pipelinetest.New(t, pipelinetest.Options{Endpoints: []provider.Endpoint{ep}})
	ctx := context.Background()
	sim := chargebeesim.New(chargebeesim.Config{WebhookURL: p.Receiver.URL + "/webhooks/chargebee-test", Username: "hook", Password: "pass"})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	_, code, err := sim.PutSubscription(ctx, "cb_sub", "active")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	sim.SetDown(true)
	_, code, err = sim.PutSubscription(ctx, "cb_sub", "cancelled")
	require.NoError(t, err)
	require.Zero(t, code, "the cancellation's webhook never arrived")
	sim.SetDown(false)

	client, err := chargebee.NewClient(chargebee.APIConfig{Site: srv.URL, APIKey: chargebeesim.DevAPIKey, RatePerSecond: 1000, Burst: 100}, p.Log)
	require.NoError(t, err)
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{PageSize: 1, Registerer: prometheus.NewRegistry(),
		Sources: []provider.Source{{Provider: provider.Chargebee, SourceAccount: "cb-site", Environment: "test",
			Endpoint: &p.Endpoints[1], Events: chargebee.Events{Client: client}, Identify: chargebee.Verifier{}}}})
	rep, err := r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	require.EqualValues(t, 1, rep.Sources[0].EventsIngested)
	require.Equal(t, 2, rep.Sources[0].Listings[0].Pages, "one event per page: the second read through next_offset")
	res := message.Resource{Provider: provider.Chargebee, SourceAccount: "cb-site", Environment: "test", Type: "subscription", ID: "cb_sub"}
	p.Eventually(func() bool { pr, ok := p.Projection(res); return ok && pr.Status == "cancelled" }, "the cancellation is applied")

	rep, err = r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	require.Zero(t, rep.Sources[0].EventsIngested)
}
