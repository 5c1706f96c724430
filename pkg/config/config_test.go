package config_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/config"
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

// The retry window is a processor setting, and a config written for the
// attempt-count policy (max_attempts) still loads: max_attempts became an
// optional cap on attempts that reached the provider. Fails if retry_window
// is not a known key or max_attempts stopped loading.
func TestProcessorRetryWindowLoadsAndOldMaxAttemptsStillLoads(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("processor:\n  retry_window: 72h\n  backoff_max: 10m\n"), lookup(nil))
	require.NoError(t, err)
	require.Equal(t, 72*time.Hour, c.Processor.RetryWindow)
	require.Equal(t, 10*time.Minute, c.Processor.BackoffMax)
	require.Zero(t, c.Processor.MaxAttempts)

	c, err = config.Parse([]byte("processor:\n  max_attempts: 8\n  backoff_base: 2s\n  backoff_max: 1h\n"), lookup(nil))
	require.NoError(t, err)
	require.Equal(t, 8, c.Processor.MaxAttempts)
	require.Zero(t, c.Processor.RetryWindow, "unset: the processor's default applies")

	_, err = config.Parse([]byte("processor:\n  retry_window: -1h\n"), lookup(nil))
	require.ErrorContains(t, err, "processor.retry_window")
}
