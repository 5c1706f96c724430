package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/provider/github/githubsim"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/reconciler"
)

// One account, two Stripe endpoints (its subscription events, its paid
// invoices), and GitHub endpoints of one organization with two hooks (one
// of them configured twice). The events scan covers what every endpoint of
// the account accepts and files each listed event under the endpoint that
// accepts it; every hook's deliveries are walked, once. Fails if a source
// is built from the account's first endpoint alone (invoice.paid is never
// listed, the second hook never walked).
func TestReconcileSourcesCoverEveryEndpointOfAnAccount(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	stripeSim := stripesim.New(stripesim.Config{})
	stripeSrv := httptest.NewServer(stripeSim)
	t.Cleanup(stripeSrv.Close)
	hook1 := githubsim.New(githubsim.Config{Repo: "org/one", HookID: 1, Token: "ghp_one"})
	hook2 := githubsim.New(githubsim.Config{Repo: "org/two", HookID: 2, Token: "ghp_two"})
	gh := http.NewServeMux()
	gh.Handle("/repos/org/one/", hook1)
	gh.Handle("/repos/org/two/", hook2)
	ghSrv := httptest.NewServer(gh)
	t.Cleanup(ghSrv.Close)

	cfg, err := config.Parse([]byte(`
endpoints:
  - {id: subs, provider: stripe, source_account: acct_dev, environment: test, secrets: [whsec_subs], event_types: [customer.subscription.updated]}
  - {id: invoices, provider: stripe, source_account: acct_dev, environment: test, secrets: [whsec_inv], event_types: [invoice.paid]}
  - {id: gh-one, provider: github, source_account: org, environment: prod, secrets: [s1], github_hook: {repo: org/one, hook_id: 1, token: ghp_one}}
  - {id: gh-two, provider: github, source_account: org, environment: prod, secrets: [s2], github_hook: {repo: org/two, hook_id: 2, token: ghp_two}}
  - {id: gh-two-again, provider: github, source_account: org, environment: prod, secrets: [s3], github_hook: {repo: org/two, hook_id: 2, token: ghp_two}}
`), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	cfg.ApplyDevDefaults()
	cfg.GitHubAPIBase = ghSrv.URL

	paid, _ := stripeSim.Emit("invoice.paid", map[string]any{"id": "in_lost", "object": "invoice", "subscription": "sub_1", "customer": "cus_1"})
	hook2.SetDown(true) // the receiver is never reached: every delivery fails
	lost, _, err := hook2.Send(ctx, "push", map[string]any{"ref": "refs/heads/main"})
	require.NoError(t, err)

	e := &env{cfg: cfg, log: pipelinetest.Logger(t), pool: s.Pool, reg: newRegistry()}
	rec, err := e.newReconciler(stripeSrv.URL, 0, nil, newRegistry())
	require.NoError(t, err)
	rep, err := rec.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	hook2.Wait()

	var endpoint string
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT endpoint_id FROM webhook_inbox WHERE provider = 'stripe' AND event_id = $1`, paid).Scan(&endpoint))
	require.Equal(t, "invoices", endpoint, "filed under the endpoint that accepts invoice.paid")
	require.Equal(t, 1, hook2.Redeliveries(lost), "the second hook is walked, once")

	deliveries := 0
	for _, sr := range rep.Sources {
		for _, l := range sr.Listings {
			if l.Listing == reconciler.ListingDeliveries {
				deliveries++
			}
		}
	}
	require.Equal(t, 2, deliveries, "one walk per hook, not per endpoint")
}
