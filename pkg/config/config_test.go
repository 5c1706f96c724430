package config_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/stripesim"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestExampleConfigLoadsWithDevDefaults(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../hookyard.example.yaml")
	require.NoError(t, err)
	c, err := config.Parse(raw, lookup(nil))
	require.NoError(t, err)
	ids := map[string][3]string{}
	for _, ep := range c.Endpoints {
		ids[ep.ID] = [3]string{ep.Provider, ep.SourceAccount, ep.Environment}
		require.NotEmpty(t, ep.Secrets)
	}
	require.Equal(t, map[string][3]string{
		"stripe-dev":    {"stripe", "acct_dev", "test"},
		"chargebee-dev": {"chargebee", "dev-site", "test"},
		"github-dev":    {"github", "dev-org", "prod"},
		"standard-dev":  {"standard-webhooks", "dev-sender", "test"},
	}, ids)
	require.Equal(t, "127.0.0.1:8080", c.HTTPAddr)
	require.Equal(t, "127.0.0.1:8081", c.OpsAddr)
	require.Equal(t, "postgres://postgres@127.0.0.1:5432/hookyard?sslmode=disable", c.DatabaseURL)
	require.Empty(t, c.KafkaBrokers)
}

func TestSecretsAndAddressesComeFromTheEnvironment(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../hookyard.example.yaml")
	require.NoError(t, err)
	c, err := config.Parse(raw, lookup(map[string]string{
		"STRIPE_WEBHOOK_SECRET": "whsec_from_env", "CHARGEBEE_WEBHOOK_USERNAME": "u", "CHARGEBEE_WEBHOOK_PASSWORD": "p",
		"KAFKA_BROKERS": "k1:9092, k2:9092", "OPS_TOKEN": "tok", "HTTP_ADDR": "0.0.0.0:9999", "STRIPE_API_BASE": "http://sim",
	}))
	require.NoError(t, err)
	require.Equal(t, []string{"whsec_from_env"}, c.Endpoints[0].Secrets)
	require.Equal(t, []string{"u:p"}, c.Endpoints[1].Secrets)
	require.Equal(t, []string{"k1:9092", "k2:9092"}, c.KafkaBrokers)
	require.Equal(t, "tok", c.OpsToken)
	require.Equal(t, "0.0.0.0:9999", c.HTTPAddr)
	require.Equal(t, "http://sim", c.StripeBase("default"))
}

func TestInvalidConfigNamesTheField(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte(`
endpoints:
  - id: a
    provider: paypal
    source_account: x
    environment: test
    secrets: ["${MISSING}"]
  - id: a
    provider: stripe
    environment: test
    secrets: [s]
`), lookup(nil))
	require.Error(t, err)
	for _, want := range []string{"endpoints[0].provider", "endpoints[0].secrets[0] is empty", "endpoints[1].id \"a\" is defined twice", "endpoints[1].source_account"} {
		require.Contains(t, err.Error(), want)
	}
	_, err = config.Parse([]byte("endpointz: []\n"), lookup(nil))
	require.ErrorContains(t, err, "endpointz")
}

// Each Stripe endpoint names its own API key (expanded from the environment
// like its secrets) and, for Connect, the account to act for; the global
// STRIPE_API_KEY stays the fallback for endpoints that name none.
func TestEndpointAPICredentialsComeFromTheEnvironment(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`
endpoints:
  - id: a
    provider: stripe
    source_account: acct_a
    environment: live
    secrets: [whsec_a]
    api_key: ${STRIPE_API_KEY_ACCT_A}
  - id: connected
    provider: stripe
    source_account: acct_c
    environment: test
    secrets: [whsec_c]
    api_key: ${STRIPE_API_KEY_PLATFORM}
    stripe_account: acct_c
  - id: fallback
    provider: stripe
    source_account: acct_f
    environment: test
    secrets: [whsec_f]
`), lookup(map[string]string{"STRIPE_API_KEY_ACCT_A": "sk_live_a", "STRIPE_API_KEY_PLATFORM": "sk_test_p", "STRIPE_API_KEY": "sk_test_global"}))
	require.NoError(t, err)
	require.Equal(t, "sk_live_a", c.Endpoints[0].APIKey)
	require.Empty(t, c.Endpoints[0].StripeAccount)
	require.Equal(t, "sk_test_p", c.Endpoints[1].APIKey)
	require.Equal(t, "acct_c", c.Endpoints[1].StripeAccount)
	require.Empty(t, c.Endpoints[2].APIKey)
	require.Equal(t, "sk_test_global", c.StripeAPIKey)
}

// The example config's Stripe endpoint reads with a dev key the simulator of
// `hookyard dev` accepts, unless STRIPE_API_KEY says otherwise.
func TestExampleStripeEndpointHasADevAPIKey(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../hookyard.example.yaml")
	require.NoError(t, err)
	c, err := config.Parse(raw, lookup(nil))
	require.NoError(t, err)
	require.Equal(t, "stripe-dev", c.Endpoints[0].ID)
	require.Equal(t, stripesim.DevAPIKey, c.Endpoints[0].APIKey)
	c, err = config.Parse(raw, lookup(map[string]string{"STRIPE_API_KEY": "sk_test_mine"}))
	require.NoError(t, err)
	require.Equal(t, "sk_test_mine", c.Endpoints[0].APIKey)
}

// API credentials that cannot be right are refused at load, naming the
// field: a key whose name says it is of the other mode than the endpoint's
// environment, credentials on an endpoint whose provider has no API client
// (they would be silently unused), and a Connect account other than the
// endpoint's source account (the receiver refuses that account's events).
func TestEndpointAPICredentialsThatCannotBeRightAreRefused(t *testing.T) {
	t.Parallel()
	_, err := config.Parse([]byte(`
endpoints:
  - id: a
    provider: stripe
    source_account: acct_a
    environment: test
    secrets: [whsec_a]
    api_key: sk_live_a
  - id: b
    provider: stripe
    source_account: acct_b
    environment: production
    secrets: [whsec_b]
    api_key: rk_test_b
  - id: c
    provider: chargebee
    source_account: site
    environment: test
    secrets: ["u:p"]
    api_key: cb_key
    stripe_account: acct_x
  - id: d
    provider: stripe
    source_account: acme
    environment: test
    secrets: [whsec_d]
    stripe_account: acct_123
`), lookup(nil))
	require.Error(t, err)
	for _, want := range []string{
		`endpoints[0].api_key`, "live-mode key for test-mode data",
		`endpoints[1].api_key`, "test-mode key for live-mode data",
		`endpoints[2].api_key`, `endpoints[2].stripe_account`,
		`endpoints[3].stripe_account "acct_123" must equal source_account "acme"`,
	} {
		require.ErrorContains(t, err, want)
	}
}
