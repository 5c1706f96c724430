package stripe_test

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

func stripeEndpoint(id, account, env, key, stripeAccount string) provider.Endpoint {
	return provider.Endpoint{ID: id, Provider: provider.Stripe, SourceAccount: account, Environment: env,
		Secrets: []string{"whsec_x"}, APIKey: key, StripeAccount: stripeAccount}
}

// Each Stripe endpoint's resources are read with that endpoint's own key
// and Stripe-Account, never with another endpoint's: two accounts holding
// the same id each get their own object. An endpoint that names no key uses
// the fallback (STRIPE_API_KEY).
func TestEachEndpointReadsWithItsOwnCredentials(t *testing.T) {
	t.Parallel()
	sim := stripesim.New(stripesim.Config{Keys: map[string]string{
		"sk_test_a": "acct_a", "sk_live_a": "acct_a", "sk_test_b": "acct_b", "sk_test_platform": "acct_platform"}})
	sim.Connect("acct_platform", "acct_connected")
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	sim.PutFor("acct_a", stripesim.Subscription{ID: "sub_same", Status: "active"})
	sim.PutFor("acct_a", stripesim.Subscription{ID: "sub_same", Status: "past_due", Livemode: true})
	sim.PutFor("acct_b", stripesim.Subscription{ID: "sub_same", Status: "canceled"})
	sim.PutFor("acct_connected", stripesim.Subscription{ID: "sub_same", Status: "trialing"})

	accts, err := stripe.NewAccounts(stripe.APIConfig{BaseURL: srv.URL}, []provider.Endpoint{
		stripeEndpoint("a-test", "acct_a", "test", "sk_test_a", ""),
		stripeEndpoint("a-live", "acct_a", "live", "sk_live_a", ""),
		stripeEndpoint("b", "acct_b", "test", "", ""),
		stripeEndpoint("connected", "acct_connected", "test", "sk_test_platform", "acct_connected"),
		{ID: "cb", Provider: provider.Chargebee, SourceAccount: "site", Environment: "test", Secrets: []string{"u:p"}},
	}, "sk_test_b", nil)
	require.NoError(t, err)
	require.Len(t, accts.Scopes(), 4, "one per Stripe endpoint; other providers have none")

	for _, c := range []struct{ account, env, status string }{
		{"acct_a", "test", "active"}, {"acct_a", "live", "past_due"}, {"acct_b", "test", "canceled"}, {"acct_connected", "test", "trialing"},
	} {
		a, ok := accts.For(c.account, c.env)
		require.True(t, ok, "%s/%s", c.account, c.env)
		require.Equal(t, provider.IsLive(c.env), a.Client.Live())
		body, err := a.Client.Get(t.Context(), a.StripeAccount, "subscription", "sub_same")
		require.NoError(t, err, "%s/%s", c.account, c.env)
		require.Contains(t, string(body), `"status":"`+c.status+`"`, "%s/%s", c.account, c.env)
	}
	_, ok := accts.For("acct_other", "test")
	require.False(t, ok, "an account no endpoint names has no credentials, not someone else's")
	_, ok = accts.For("site", "test")
	require.False(t, ok)

	// Endpoints with the same credentials share one client: one rate limiter
	// and one breaker per set of credentials.
	accts, err = stripe.NewAccounts(stripe.APIConfig{BaseURL: srv.URL}, []provider.Endpoint{
		stripeEndpoint("a1", "acct_a", "test", "sk_test_a", ""),
		stripeEndpoint("a2", "acct_a", "test", "sk_test_a", ""),
	}, "", nil)
	require.NoError(t, err)
	require.Len(t, accts.Scopes(), 1)
}

// Credentials that would read the wrong data are refused before any call:
// an endpoint with no key and no fallback, two endpoints of one account and
// environment with different credentials, and two source accounts that would
// read the same Stripe data.
func TestAmbiguousCredentialsAreRefused(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		eps      []provider.Endpoint
		fallback string
		want     string
	}{
		"no key": {[]provider.Endpoint{stripeEndpoint("a", "acct_a", "test", "", "")}, "", `endpoint "a"`},
		"one scope, two keys": {[]provider.Endpoint{stripeEndpoint("a1", "acct_a", "test", "sk_test_1", ""),
			stripeEndpoint("a2", "acct_a", "test", "sk_test_2", "")}, "", `"a1" and "a2"`},
		"test key on a live endpoint": {[]provider.Endpoint{stripeEndpoint("a", "acct_a", "live", "", "")}, "sk_test_global",
			`endpoint "a" (environment "live") would use a test-mode key for live-mode data`},
		"two scopes, one key": {[]provider.Endpoint{stripeEndpoint("a", "acct_a", "test", "", ""),
			stripeEndpoint("b", "acct_b", "test", "", "")}, "sk_test_global", `"a" and "b"`},
	} {
		_, err := stripe.NewAccounts(stripe.APIConfig{}, c.eps, c.fallback, nil)
		require.ErrorContains(t, err, c.want, name)
	}
}
