package processor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
)

// tenancyPipeline runs the pipeline with extra Stripe endpoints and a
// fetcher that picks each resource's credentials from its endpoint, as
// `hookyard processor` wires it. The pipeline's own endpoint names no key
// and uses the fallback (the simulator's dev key).
func tenancyPipeline(t *testing.T, maxAttempts int, eps ...provider.Endpoint) *pipelinetest.Pipeline {
	t.Helper()
	p := pipelinetest.New(t, pipelinetest.Options{Endpoints: eps, NoProcessor: true})
	p.StartProcessor("p1", func(c *processor.Config) {
		accts, err := stripe.NewAccounts(stripe.APIConfig{BaseURL: p.SimServer.URL, RatePerSecond: 10000, Burst: 10000,
			Timeout: 2 * time.Second}, c.Endpoints, stripesim.DevAPIKey, p.Log)
		require.NoError(t, err)
		c.Fetchers = map[string]provider.Fetcher{provider.Stripe: stripe.Fetcher{Accounts: accts}}
		if maxAttempts > 0 {
			c.MaxAttempts = maxAttempts
		}
	})
	return p
}

// postHint sends a signed customer.subscription.updated for subID to
// endpoint ep, as Stripe would.
func postHint(t *testing.T, p *pipelinetest.Pipeline, ep provider.Endpoint, subID string) string {
	t.Helper()
	id, body := stripesim.New(stripesim.Config{}).Event("customer.subscription.updated",
		map[string]any{"id": subID, "object": "subscription", "status": "active"})
	status, resp := p.PostSigned(ep.ID, body, http.Header{stripe.SignatureHeader: {stripe.Sign(body, ep.Secrets[0], time.Now())}})
	require.Equal(t, http.StatusOK, status, resp)
	return id
}

func customerOf(t *testing.T, state []byte) string {
	t.Helper()
	var s struct {
		Customer string `json:"customer"`
	}
	require.NoError(t, json.Unmarshal(state, &s))
	return s.Customer
}

func stripeResource(account, env, id string) message.Resource {
	return message.Resource{Provider: provider.Stripe, SourceAccount: account, Environment: env, Type: "subscription", ID: id}
}

// Two Stripe endpoints, two accounts, and the same subscription id in
// each holding different objects: each endpoint's projection is fetched
// with that endpoint's own API key, so account B's projection never shows
// account A's object. Fails if the fetcher calls Stripe with one key for
// every endpoint.
func TestEachStripeEndpointIsFetchedWithItsOwnCredentials(t *testing.T) {
	t.Parallel()
	epB := provider.Endpoint{ID: "stripe-b", Provider: provider.Stripe, SourceAccount: "acct_b", Environment: "test",
		Secrets: []string{"whsec_b"}, APIKey: "sk_test_b"}
	p := tenancyPipeline(t, 0, epB)
	p.Sim.AddKey("sk_test_b", "acct_b")
	p.Sim.Put(stripesim.Subscription{ID: "sub_same", Customer: "cus_a", Status: "active"})
	p.Sim.PutFor("acct_b", stripesim.Subscription{ID: "sub_same", Customer: "cus_b", Status: "canceled"})

	postHint(t, p, p.Endpoints[0], "sub_same")
	postHint(t, p, epB, "sub_same")
	p.WaitIdle()

	a, ok := p.Projection(pipelinetest.Resource("sub_same"))
	require.True(t, ok)
	require.Equal(t, "active", a.Status)
	require.Equal(t, "cus_a", customerOf(t, a.State))
	b, ok := p.Projection(stripeResource("acct_b", "test", "sub_same"))
	require.True(t, ok)
	require.Equal(t, "canceled", b.Status)
	require.Equal(t, "cus_b", customerOf(t, b.State))
}

// A fetched object whose livemode is not the endpoint's environment (a key
// of the other mode) is refused: the event fails, counts its attempts, and
// ends dead with the reason; nothing is written. Fails if the fetcher
// writes whatever the key reads.
func TestObjectOfTheOtherModeIsNeverWritten(t *testing.T) {
	t.Parallel()
	// A Stripe-compatible key whose name says nothing of its mode, so only
	// the objects' livemode can tell: it reads live data.
	epW := provider.Endpoint{ID: "stripe-w", Provider: provider.Stripe, SourceAccount: "acct_w", Environment: "test",
		Secrets: []string{"whsec_w"}, APIKey: "key_live_w"}
	p := tenancyPipeline(t, 2, epW)
	p.Sim.AddKey("key_live_w", "acct_w")
	p.Sim.PutFor("acct_w", stripesim.Subscription{ID: "sub_w", Customer: "cus_w", Status: "active", Livemode: true})

	evt := postHint(t, p, epW, "sub_w")
	ctx := context.Background()
	var status, lastErr string
	var attempts int
	p.Eventually(func() bool {
		err := p.Pool.QueryRow(ctx, `SELECT status, attempts, coalesce(last_error, '') FROM webhook_inbox WHERE event_id = $1`, evt).
			Scan(&status, &attempts, &lastErr)
		return err == nil && status == "dead"
	}, "the event ends dead")
	require.Equal(t, 2, attempts)
	require.Contains(t, lastErr, "livemode")
	_, ok := p.Projection(stripeResource("acct_w", "test", "sub_w"))
	require.False(t, ok, "an object of the other mode is never written")
}
