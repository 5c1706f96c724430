package config_test

import (
	"maps"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

// strongExampleEnv sets every secret of hookyard.example.yaml to a value of
// its own, API keys included.
var strongExampleEnv = map[string]string{
	"OPS_TOKEN":                  "0123456789abcdef0123456789abcdef",
	"STRIPE_WEBHOOK_SECRET":      "whsec_prod_0123456789abcdef",
	"CHARGEBEE_WEBHOOK_USERNAME": "cb", "CHARGEBEE_WEBHOOK_PASSWORD": "cb-prod-password-0123",
	"GITHUB_WEBHOOK_SECRET":   "gh-prod-0123456789abcdef",
	"STANDARD_WEBHOOK_SECRET": "whsec_cHJvZC1zdGFuZGFyZC13ZWJob29rcy1rZXk=",
	"GITHUB_TOKEN":            "ghp_prod",
	"STRIPE_API_KEY":          "sk_test_prod_key",
	"CHARGEBEE_API_KEY":       "cb_prod_key",
	"OPS_APP_TOKEN":           "app-prod-0123456789abcdef0123456789",
}

// The example config's API keys fall back to keys anyone who read the
// repository knows (the simulators'): outside `hookyard dev` they are
// refused like its webhook secrets, naming the variable to set.
func TestProductionRefusesTheExampleConfigsDevAPIKeys(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../hookyard.example.yaml")
	require.NoError(t, err)
	c, err := config.Parse(raw, lookup(strongExampleEnv))
	require.NoError(t, err)
	require.NoError(t, c.CheckProduction())
	for _, v := range []string{"STRIPE_API_KEY", "CHARGEBEE_API_KEY"} {
		env := maps.Clone(strongExampleEnv)
		delete(env, v)
		c, err := config.Parse(raw, lookup(env))
		require.NoError(t, err)
		err = c.CheckProduction()
		require.ErrorIs(t, err, config.ErrDevDefault, v)
		require.ErrorContains(t, err, v)
		for _, svc := range []string{"receiver", "processor", "reconciler", "api", "outbox-relay", "effects"} {
			require.ErrorIs(t, c.CheckService(svc), config.ErrDevDefault, "%s with %s unset", svc, v)
		}
	}
}

// STRIPE_API_KEY has no default: a Stripe endpoint without a key of its
// own is refused where it would be read (processor, reconciler), instead
// of reading with the simulator's key and getting 401 on every fetch. Only
// `hookyard dev` fills in the dev key and the dev ops token.
func TestStripeAPIKeyHasADefaultOnlyInDev(t *testing.T) {
	t.Parallel()
	doc := []byte(`endpoints:
  - {id: pay, provider: stripe, source_account: acct_1, environment: test, secrets: ["whsec_0123456789abcdef"]}
`)
	c, err := config.Parse(doc, lookup(map[string]string{"OPS_TOKEN": strongExampleEnv["OPS_TOKEN"]}))
	require.NoError(t, err)
	require.Empty(t, c.StripeAPIKey)
	for _, svc := range []string{"processor", "reconciler", ""} {
		err := c.CheckService(svc)
		require.ErrorContains(t, err, `endpoints[0] (endpoint "pay") has no api_key and STRIPE_API_KEY is unset`, svc)
	}
	require.NoError(t, c.CheckService("receiver"), "the receiver reads no API")

	c.ApplyDevDefaults()
	require.Equal(t, config.StripeAPIKeyDevDefault, c.StripeAPIKey)
	require.Equal(t, stripesim.DevAPIKey, c.StripeAPIKey, "the dev key is the simulator's")
	require.Equal(t, strongExampleEnv["OPS_TOKEN"], c.OpsToken, "dev keeps a token that is set")

	c, err = config.Parse(doc, lookup(map[string]string{"STRIPE_API_KEY": "sk_test_mine"}))
	require.NoError(t, err)
	require.Equal(t, "sk_test_mine", c.StripeAPIKey)
	require.Empty(t, c.OpsToken)
	c.ApplyDevDefaults()
	require.Equal(t, "sk_test_mine", c.StripeAPIKey, "dev keeps a key that is set")
	require.Equal(t, config.OpsTokenDevDefault, c.OpsToken)
}

// A webhook secret that is empty once its spaces and its known prefix are
// gone ("whsec_${TYPO}" with TYPO unset, "${GH_SECRET:- }") verifies
// signatures anyone can make: it never loads.
func TestNearEmptyWebhookSecretsNeverLoad(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ provider, secret string }{
		{"stripe", "whsec_${STRIPE_WEBHOOK_SECRET_TYPO}"},
		{"standard-webhooks", " whsec_ "},
		{"github", "${GH_SECRET:- }"},
		{"github", "  "},
		{"chargebee", "user:${CB_PASSWORD:- }"},
	} {
		doc := `endpoints:
  - {id: ok, provider: github, source_account: o, environment: prod, secrets: ["gh-0123456789abcdef"]}
  - {id: hook-x, provider: ` + tc.provider + `, source_account: a, environment: test, secrets: ["` + tc.secret + `"]}
`
		_, err := config.Parse([]byte(doc), lookup(nil))
		require.ErrorContains(t, err, `endpoints[1].secrets[0] is empty`, "%s %q", tc.provider, tc.secret)
		require.ErrorContains(t, err, `endpoint "hook-x"`)
		require.NotContains(t, err.Error(), "endpoints[0]")
	}
}

// Outside `hookyard dev` a webhook secret shorter than 16 bytes (spaces
// trimmed, without its whsec_ prefix; of Chargebee's "user:password" the
// password) refuses to start, naming the endpoint: it is guessable.
func TestShortWebhookSecretsRefuseToStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		provider, secret string
		ok               bool
	}{
		{"stripe", "whsec_0123456789abcde", false},
		{"stripe", "whsec_0123456789abcdef", true},
		{"standard-webhooks", "whsec_MDEyMzQ1Njc=", false},
		{"standard-webhooks", "whsec_MDEyMzQ1Njc4OWFiY2RlZg==", true},
		{"github", " 0123456789abcde ", false},
		{"github", "0123456789abcdef", true},
		{"chargebee", "a-long-username-0123456789:short", false},
		{"chargebee", "u:0123456789abcdef", true},
	} {
		// The first, long secret is the one being rotated out.
		old := "whsec_0123456789abcdef-old"
		switch tc.provider {
		case "chargebee":
			old = "u:0123456789abcdef-old"
		case "standard-webhooks":
			old = "whsec_MDEyMzQ1Njc4OWFiY2RlZi1vbGQ=" // a usable key: base64
		}
		doc := `endpoints:
  - {id: hook-x, provider: ` + tc.provider + `, source_account: a, environment: test, secrets: ["` + old + `", "` + tc.secret + `"]}
`
		c, err := config.Parse([]byte(doc), lookup(map[string]string{"OPS_TOKEN": strongExampleEnv["OPS_TOKEN"], "STRIPE_API_KEY": "sk_test_k"}))
		require.NoError(t, err, "a short secret loads (dev may use one)")
		for _, check := range []func() error{c.CheckProduction, func() error { return c.CheckService("receiver") }} {
			err = check()
			if tc.ok {
				require.NoError(t, err, "%s %q", tc.provider, tc.secret)
				continue
			}
			require.ErrorIs(t, err, config.ErrWeakSecret, "%s %q", tc.provider, tc.secret)
			require.ErrorContains(t, err, `endpoints[0].secrets[1] (endpoint "hook-x")`)
			require.ErrorContains(t, err, "at least 16 bytes")
		}
	}
}

// Each service needs only the secrets it reads: a receiver starts with the
// webhook secrets and no OPS_TOKEN or API key; a processor with its API key
// and none of the webhook secrets; the api with OPS_TOKEN; migrate with the
// database alone. Only `api` requires OPS_TOKEN. CheckProduction keeps
// asking every service for everything.
func TestEachServiceNeedsOnlyTheSecretsItReads(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../deploy/hookyard.yaml")
	require.NoError(t, err)
	public := map[string]string{
		"STRIPE_ACCOUNT_ID": "acct_1", "STRIPE_ENVIRONMENT": "live", "CHARGEBEE_SITE": "site", "CHARGEBEE_ENVIRONMENT": "live",
		"GITHUB_ORG": "org", "STANDARD_SENDER": "s", "STANDARD_ENVIRONMENT": "live", "DATABASE_URL": "postgres://db/hookyard",
	}
	webhook := map[string]string{
		"STRIPE_WEBHOOK_SECRET": "whsec_0123456789abcdef", "CHARGEBEE_WEBHOOK_USERNAME": "u",
		"CHARGEBEE_WEBHOOK_PASSWORD": "0123456789abcdef", "GITHUB_WEBHOOK_SECRET": "0123456789abcdef",
		"STANDARD_WEBHOOK_SECRET": "whsec_MDEyMzQ1Njc4OWFiY2RlZg==",
	}
	apiKey := map[string]string{"STRIPE_API_KEY": "rk_live_0123456789"}
	ops := map[string]string{"OPS_TOKEN": strongExampleEnv["OPS_TOKEN"]}
	with := func(sets ...map[string]string) map[string]string {
		env := maps.Clone(public)
		for _, s := range sets {
			maps.Copy(env, s)
		}
		return env
	}
	for svc, env := range map[string]map[string]string{
		"receiver":     with(webhook),
		"processor":    with(apiKey),
		"reconciler":   with(apiKey),
		"api":          with(ops),
		"outbox-relay": with(),
		"effects":      with(),
		"migrate":      with(),
	} {
		c, err := config.ParseService(raw, lookup(env), svc)
		require.NoError(t, err, svc)
		require.NoError(t, c.CheckService(svc), svc)
		require.Equal(t, "postgres://db/hookyard", c.DatabaseURL)
		// Everything at once still needs everything.
		_, err = config.Parse(raw, lookup(env))
		if svc != "receiver" {
			require.ErrorContains(t, err, "secrets[0]", svc)
		}
	}
	// What a service reads must be there.
	for svc, env := range map[string]map[string]string{
		"receiver":   with(),
		"processor":  with(),
		"reconciler": with(),
		"api":        with(),
	} {
		c, err := config.ParseService(raw, lookup(env), svc)
		if err == nil {
			err = c.CheckService(svc)
		}
		require.Error(t, err, svc)
	}
	c, err := config.ParseService(raw, lookup(with(webhook, apiKey)), "receiver")
	require.NoError(t, err)
	require.NoError(t, c.CheckService("receiver"))
	require.ErrorContains(t, c.CheckProduction(), "OPS_TOKEN", "CheckProduction keeps requiring OPS_TOKEN of every service")
	require.ErrorContains(t, c.CheckService("api"), "OPS_TOKEN")
	// An unknown command reads everything.
	_, err = config.ParseService(raw, lookup(with(apiKey)), "something-new")
	require.ErrorContains(t, err, "secrets[0]")
}
