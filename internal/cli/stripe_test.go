package cli

import (
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

// The reconciler lists each Stripe endpoint's account with that endpoint's
// own key and Stripe-Account, and asks for terminal statuses to be left
// alone; an endpoint without api_key lists with STRIPE_API_KEY. Fails if the
// sources share one client with one key.
func TestReconcilerSourcesUseEachEndpointsCredentials(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
endpoints:
  - {id: a, provider: stripe, source_account: acct_a, environment: test, secrets: [whsec_a], api_key: "${KEY_A}"}
  - {id: c, provider: stripe, source_account: acct_c, environment: test, secrets: [whsec_c], api_key: "${KEY_PLATFORM}", stripe_account: acct_c}
  - {id: d, provider: stripe, source_account: acct_dev, environment: test, secrets: [whsec_d]}
  - {id: g, provider: github, source_account: org, environment: prod, secrets: [s]}
`), func(k string) (string, bool) {
		v, ok := map[string]string{"KEY_A": "sk_test_a", "KEY_PLATFORM": "sk_test_platform"}[k]
		return v, ok
	})
	require.NoError(t, err)
	cfg.ApplyDevDefaults() // endpoint d reads with STRIPE_API_KEY, the simulator's dev key
	sim := stripesim.New(stripesim.Config{Keys: map[string]string{
		"sk_test_a": "acct_a", "sk_test_platform": "acct_platform", stripesim.DevAPIKey: stripesim.DevAccount}})
	sim.Connect("acct_platform", "acct_c")
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	sim.PutFor("acct_a", stripesim.Subscription{ID: "sub_a", Status: "active"})
	sim.PutFor("acct_c", stripesim.Subscription{ID: "sub_c", Status: "canceled"})
	sim.PutFor(stripesim.DevAccount, stripesim.Subscription{ID: "sub_d", Status: "trialing"})

	e := &env{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	sources, err := e.reconcileSources(srv.URL)
	require.NoError(t, err)
	got := map[string][]string{}
	for _, s := range sources {
		require.Equal(t, "subscription", s.ResourceType)
		require.Contains(t, s.Terminal, "canceled")
		objs, _, err := s.Lister.ListObjects(t.Context(), s.APIAccount, s.ResourceType, "", 10)
		require.NoError(t, err, s.SourceAccount)
		for _, o := range objs {
			got[s.SourceAccount] = append(got[s.SourceAccount], o.ID)
		}
	}
	require.Equal(t, map[string][]string{"acct_a": {"sub_a"}, "acct_c": {"sub_c"}, "acct_dev": {"sub_d"}}, got)
}
