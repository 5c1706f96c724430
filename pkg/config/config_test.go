package config_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
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
    provider: github
    source_account: org
    environment: test
    secrets: ["s"]
    api_key: gh_key
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

// Production never runs on dev secrets: the example config with nothing set
// is refused, naming each variable, and accepted once they are set.
func TestProductionRefusesDevDefaults(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../hookyard.example.yaml")
	require.NoError(t, err)
	c, err := config.Parse(raw, lookup(nil))
	require.NoError(t, err)
	err = c.CheckProduction()
	require.ErrorIs(t, err, config.ErrDevDefault)
	for _, v := range []string{"OPS_TOKEN", "STRIPE_WEBHOOK_SECRET", "CHARGEBEE_WEBHOOK_PASSWORD", "GITHUB_WEBHOOK_SECRET", "STANDARD_WEBHOOK_SECRET", "GITHUB_TOKEN",
		"STRIPE_API_KEY", "CHARGEBEE_API_KEY"} {
		require.Contains(t, err.Error(), v)
	}

	strong := strongExampleEnv
	c, err = config.Parse(raw, lookup(strong))
	require.NoError(t, err)
	require.NoError(t, c.CheckProduction())

	for token, why := range map[string]string{
		"":                                "unset",
		config.OpsTokenDevDefault:         "dev token",
		"short-token-of-31-bytes-xxxxxxx": "31 bytes",
	} {
		env := maps.Clone(strong)
		env["OPS_TOKEN"] = token
		c, err = config.Parse(raw, lookup(env))
		require.NoError(t, err)
		err = c.CheckProduction()
		require.ErrorIs(t, err, config.ErrDevDefault, why)
		require.Contains(t, err.Error(), "OPS_TOKEN", why)
	}
}

// Every fallback of a secret in the example config, API keys included, is
// in DevSecrets, so a new dev secret added to the file cannot slip into
// production.
func TestDevSecretsListEveryFallbackOfTheExampleConfig(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../hookyard.example.yaml")
	require.NoError(t, err)
	found := 0
	for _, m := range regexp.MustCompile(`\$\{([A-Z_]+):-([^}]*)\}`).FindAllStringSubmatch(string(raw), -1) {
		name, def := m[1], m[2]
		if !regexp.MustCompile(`SECRET|PASSWORD|TOKEN|API_KEY`).MatchString(name) {
			continue
		}
		found++
		require.Equal(t, name, config.DevSecrets[def], "fallback of %s", name)
	}
	require.Equal(t, len(config.DevSecrets), found)
}

// Secrets can come from files (Docker and Kubernetes secrets): ${file:PATH}
// in the config, and VAR_FILE for any variable, OPS_TOKEN_FILE included.
func TestSecretsAreReadFromFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(v), 0o600))
		return p
	}
	direct := write("direct", "whsec_from_file\n")
	viaVar := write("viaVar", "gh-from-file\r\n")
	token := write("token", "0123456789abcdef0123456789abcdef\n")
	doc := `endpoints:
  - {id: s, provider: stripe, source_account: a, environment: test, secrets: ["${file:` + direct + `}"]}
  - {id: g, provider: github, source_account: o, environment: prod, secrets: ["${GH_SECRET:-dev}"]}
`
	c, err := config.Parse([]byte(doc), lookup(map[string]string{"GH_SECRET_FILE": viaVar, "OPS_TOKEN_FILE": token}))
	require.NoError(t, err)
	require.Equal(t, []string{"whsec_from_file"}, c.Endpoints[0].Secrets)
	require.Equal(t, []string{"gh-from-file"}, c.Endpoints[1].Secrets)
	require.Equal(t, "0123456789abcdef0123456789abcdef", c.OpsToken)

	_, err = config.Parse([]byte(doc), lookup(map[string]string{"GH_SECRET_FILE": filepath.Join(dir, "missing")}))
	require.ErrorContains(t, err, "read secret file")
}

// A Chargebee credential with an empty username or password (an unset
// variable in "${U}:${P}") is a config error, not a secret that matches.
func TestChargebeeSecretsNeedBothParts(t *testing.T) {
	t.Parallel()
	for _, secret := range []string{"user:", ":pass", "nocolon"} {
		doc := `endpoints:
  - {id: c, provider: chargebee, source_account: s, environment: test, secrets: ["` + secret + `"]}
`
		_, err := config.Parse([]byte(doc), lookup(nil))
		require.ErrorContains(t, err, "endpoints[0].secrets[0]", secret)
	}
}

// The config the Docker image ships has no fallback for any secret: with
// nothing set it does not load, and nothing in it is a dev secret.
func TestShippedProductionConfigCarriesNoSecrets(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../deploy/hookyard.yaml")
	require.NoError(t, err)
	require.NotContains(t, string(raw), ":-", "no fallbacks in the production config")
	_, err = config.Parse(raw, lookup(nil))
	require.Error(t, err)
	env := map[string]string{
		"OPS_TOKEN": "0123456789abcdef0123456789abcdef", "STRIPE_ACCOUNT_ID": "acct_1", "STRIPE_ENVIRONMENT": "live",
		"STRIPE_WEBHOOK_SECRET": "whsec_x0123456789abcdef", "CHARGEBEE_SITE": "site", "CHARGEBEE_ENVIRONMENT": "live",
		"CHARGEBEE_WEBHOOK_USERNAME": "u", "CHARGEBEE_WEBHOOK_PASSWORD": "p0123456789abcdef", "GITHUB_ORG": "org",
		"GITHUB_WEBHOOK_SECRET": "g0123456789abcdef", "STANDARD_SENDER": "s", "STANDARD_ENVIRONMENT": "live",
		"STANDARD_WEBHOOK_SECRET": "whsec_cHJvZC1zdGFuZGFyZC1rZXk=", "STRIPE_API_KEY": "rk_live_x",
	}
	c, err := config.Parse(raw, lookup(env))
	require.NoError(t, err)
	require.NoError(t, c.CheckProduction())
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

// The receipt URL comes from effects.receipt_url, and RECEIPT_WEBHOOK_URL
// overrides it (the contract's variable); a URL that is not absolute
// http(s), or negative effects settings, are refused naming the field.
// Outside dev, plain http to another host is refused unless allowed: the
// receipt carries the invoice. Fails if the variable is ignored or a bad
// URL reaches the sender.
func TestReceiptURLComesFromConfigOrEnvironmentAndIsChecked(t *testing.T) {
	t.Parallel()
	doc := []byte("effects:\n  receipt_url: https://receipts.example.com/hook\n  timeout: 3s\n")
	c, err := config.Parse(doc, lookup(nil))
	require.NoError(t, err)
	require.Equal(t, "https://receipts.example.com/hook", c.Effects.ReceiptURL)
	require.Equal(t, 3*time.Second, c.Effects.Timeout)

	c, err = config.Parse(doc, lookup(map[string]string{"RECEIPT_WEBHOOK_URL": "http://127.0.0.1:9999/r"}))
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:9999/r", c.Effects.ReceiptURL)

	c, err = config.Parse([]byte("{}"), lookup(nil))
	require.NoError(t, err)
	require.Empty(t, c.Effects.ReceiptURL, "no URL by default: receipts stay pending")

	_, err = config.Parse(doc, lookup(map[string]string{"RECEIPT_WEBHOOK_URL": "receipts.example.com/hook"}))
	require.ErrorContains(t, err, "effects.receipt_url")
	_, err = config.Parse([]byte("effects:\n  timeout: -1s\n  max_attempts: -2\n"), lookup(nil))
	require.ErrorContains(t, err, "effects.timeout")
	require.ErrorContains(t, err, "effects.batch_size and max_attempts")

	strong := map[string]string{"OPS_TOKEN": "0123456789abcdef0123456789abcdef"}
	for url, ok := range map[string]bool{
		"https://receipts.example.com/hook": true,
		"http://127.0.0.1:9999/r":           true,
		"http://localhost/r":                true,
		"http://receipts.internal/hook":     false,
	} {
		env := maps.Clone(strong)
		env["RECEIPT_WEBHOOK_URL"] = url
		c, err := config.Parse([]byte("{}"), lookup(env))
		require.NoError(t, err)
		if ok {
			require.NoError(t, c.CheckProduction(), url)
			continue
		}
		err = c.CheckProduction()
		require.ErrorIs(t, err, config.ErrDevDefault, url)
		require.ErrorContains(t, err, "RECEIPT_WEBHOOK_URL")
		c, err = config.Parse([]byte("effects:\n  allow_http: true\n"), lookup(env))
		require.NoError(t, err)
		require.NoError(t, c.CheckProduction(), "allow_http lets %s through", url)
	}
}

// Reconcile sources are configured per endpoint, from the environment: a
// Chargebee site and its API key, a GitHub hook and its token; settings on
// the wrong provider, an incomplete hook, and the example's dev token
// outside dev are refused, naming the field. Fails if the fields do not
// load or are accepted where they would be silently unused.
func TestReconcileSourcesComeFromEndpointsAndTheEnvironment(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
endpoints:
  - id: cb
    provider: chargebee
    source_account: site
    environment: test
    secrets: ["u:p"]
    api_key: ${CB_KEY}
    site: https://site-test.chargebee.com
  - id: gh
    provider: github
    source_account: org
    environment: prod
    secrets: [s]
    github_hook: {repo: org/repo, hook_id: 7, token: "${GITHUB_TOKEN}"}
reconciler:
  overlap: 15m
  backfill: 72h
  stripe_rate: 5
`), lookup(map[string]string{"CB_KEY": "cb_live_key", "GITHUB_TOKEN": "ghp_real"}))
	require.NoError(t, err)
	require.Equal(t, "cb_live_key", cfg.Endpoints[0].APIKey)
	require.Equal(t, "https://site-test.chargebee.com", cfg.Endpoints[0].Site)
	require.Equal(t, provider.GitHubHook{Repo: "org/repo", HookID: 7, Token: "ghp_real"}, *cfg.Endpoints[1].GitHubHook)
	require.Equal(t, 15*time.Minute, cfg.Reconcile.Overlap)
	require.Equal(t, 72*time.Hour, cfg.Reconcile.Backfill)
	require.Equal(t, 5.0, cfg.Reconcile.StripeRate)

	_, err = config.Parse([]byte(`
endpoints:
  - id: a
    provider: stripe
    source_account: acct_a
    environment: test
    secrets: [whsec_a]
    site: https://x.chargebee.com
    github_hook: {repo: org/repo, hook_id: 1}
  - id: b
    provider: github
    source_account: org
    environment: prod
    secrets: [s]
    github_hook: {repo: org, token: t}
`), lookup(nil))
	require.Error(t, err)
	for _, want := range []string{"endpoints[0].site", "endpoints[0].github_hook is only read", "endpoints[1].github_hook"} {
		require.ErrorContains(t, err, want)
	}

	cfg, err = config.Parse([]byte(`
endpoints:
  - id: gh
    provider: github
    source_account: org
    environment: prod
    secrets: [s]
    github_hook: {org: org, hook_id: 1, token: "${GITHUB_TOKEN:-ghp_hookyard_dev}"}
`), lookup(map[string]string{"OPS_TOKEN": strings.Repeat("x", 40)}))
	require.NoError(t, err)
	require.ErrorContains(t, cfg.CheckProduction(), "GITHUB_TOKEN")
}

func TestProcessorSessionSettingsLoadAndNegativeOnesAreRefused(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("processor:\n  session_timeout: 10s\n  heartbeat_interval: 2s\n  rebalance_timeout: 40s\n"), lookup(nil))
	require.NoError(t, err)
	require.Equal(t, 10*time.Second, c.Processor.SessionTimeout)
	require.Equal(t, 2*time.Second, c.Processor.HeartbeatInterval)
	require.Equal(t, 40*time.Second, c.Processor.RebalanceTimeout)
	_, err = config.Parse([]byte("processor:\n  session_timeout: -1s\n"), lookup(nil))
	require.ErrorContains(t, err, "processor.session_timeout")
}

// A GitHub App's hook reads its private key from a file (the secret mount)
// and is checked at load: a key file that is missing or holds no RSA key
// fails the config, naming the field and never the key.
func TestGitHubAppHookReadsItsKeyFromAFile(t *testing.T) {
	t.Parallel()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "app.pem")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), 0o600))
	badFile := filepath.Join(dir, "bad.pem")
	require.NoError(t, os.WriteFile(badFile, []byte("-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0LWJ5dGVz\n-----END RSA PRIVATE KEY-----\n"), 0o600))
	doc := func(file string) []byte {
		return []byte(`
endpoints:
  - id: gh
    provider: github
    source_account: org
    environment: prod
    secrets: [s]
    github_hook: {app_id: "123456", private_key: "${file:` + file + `}"}
`)
	}
	cfg, err := config.Parse(doc(keyFile), lookup(nil))
	require.NoError(t, err)
	require.Equal(t, "123456", cfg.Endpoints[0].GitHubHook.AppID)
	require.Contains(t, cfg.Endpoints[0].GitHubHook.PrivateKey, "RSA PRIVATE KEY")

	_, err = config.Parse(doc(badFile), lookup(nil))
	require.ErrorContains(t, err, "endpoints[0].github_hook")
	require.NotContains(t, err.Error(), "c2VjcmV0LWJ5dGVz")
}

// Declared facts and kept state fields are read as written, and a
// declaration that cannot keep anything is refused naming its entry: an
// empty list would silently keep nothing of a fact a receipt needs. Fails
// if the keys are not read or not checked.
func TestFactDeclarationsAndStateFieldsAreReadAndChecked(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`
facts:
  - provider: stripe
    type: invoice_paid
    fields: [id, amount_paid, status_transitions.paid_at]
projection:
  state_fields: [metadata.plan]
`), lookup(nil))
	require.NoError(t, err)
	require.Equal(t, []string{"id", "amount_paid", "status_transitions.paid_at"}, c.Facts.Fields("stripe", "invoice_paid"))
	require.Equal(t, []string{"metadata.plan"}, c.Projection.StateFields)

	_, err = config.Parse([]byte(`
facts:
  - provider: stripe
    type: invoice_paid
    fields: []
  - provider: stripe
    type: invoice_paid
    fields: [a..b]
`), lookup(nil))
	require.ErrorContains(t, err, "facts[0]: fields must name at least one field")
	require.ErrorContains(t, err, "facts[1]: stripe invoice_paid is declared twice")
	require.ErrorContains(t, err, `facts[1].fields[0]: "a..b" is not a dotted field path`)
}

// An identity horizon shorter than providers redeliver is refused with the
// reason; minute partitions load; a config of before (payload_age alone)
// still loads, with the new keys at their defaults.
func TestRetentionKeysAreValidatedAndOldConfigsStillLoad(t *testing.T) {
	t.Parallel()
	const ep = `
endpoints:
  - id: a
    provider: stripe
    source_account: acct
    environment: test
    secrets: [s]
`
	short, err := config.Parse([]byte(ep+"retention:\n  identity_age: 48h\n"), lookup(nil))
	require.NoError(t, err, "hookyard dev may shorten it")
	require.ErrorContains(t, short.CheckService("processor"), "retention.identity_age 48h0m0s is below 96h0m0s: providers redeliver")
	_, err = config.Parse([]byte(ep+"retention:\n  identity_age: -1h\n"), lookup(nil))
	require.ErrorContains(t, err, "retention.identity_age must not be negative")
	_, err = config.Parse([]byte(ep+"retention:\n  partition_interval: 90s\n"), lookup(nil))
	require.ErrorContains(t, err, "retention.partition_interval")
	c, err := config.Parse([]byte(ep+"retention:\n  partition_interval: 1m\n"), lookup(nil))
	require.NoError(t, err)
	require.Equal(t, time.Minute, c.Retention.PartitionInterval)
	c, err = config.Parse([]byte(ep+"retention:\n  payload_age: 720h\n"), lookup(nil))
	require.NoError(t, err)
	require.Equal(t, 720*time.Hour, c.Retention.PayloadAge)
	require.Equal(t, config.IdentityAgeDefault, c.Retention.IdentityAge)
	require.Equal(t, config.DeadPayloadAgeDefault, c.Retention.DeadPayloadAge)
	require.Equal(t, config.PartitionIntervalDefault, c.Retention.PartitionInterval)
	require.Equal(t, config.DeliveryAgeDefault, c.Retention.DeliveryAge)
}

// A delivery horizon shorter than the subscriber feeder's group can rewind
// is refused outside `hookyard dev`, with the reason; a negative one
// everywhere. Fails if the floor or the sign check goes.
func TestDeliveryAgeBelowTheFeedersRewindIsRefused(t *testing.T) {
	t.Parallel()
	const ep = `
endpoints:
  - id: a
    provider: stripe
    source_account: acct
    environment: test
    secrets: [s]
`
	short, err := config.Parse([]byte(ep+"retention:\n  delivery_age: 24h\n"), lookup(nil))
	require.NoError(t, err, "hookyard dev may shorten it")
	require.ErrorContains(t, short.CheckService("processor"), "retention.delivery_age 24h0m0s is below 192h0m0s")
	_, err = config.Parse([]byte(ep+"retention:\n  delivery_age: -1h\n"), lookup(nil))
	require.ErrorContains(t, err, "retention.delivery_age must not be negative")
	ok, err := config.Parse([]byte(ep+"retention:\n  delivery_age: 240h\n"), lookup(nil))
	require.NoError(t, err)
	require.Equal(t, 240*time.Hour, ok.Retention.DeliveryAge)
	require.NotContains(t, fmt.Sprint(ok.CheckService("processor")), "delivery_age")
}

// Declared effects are read with their causes, a url_env's variable wins
// over url, and an effect without exactly one cause is refused naming its
// entry. The example config's declarations (the built-in facts and the
// receipt, written out) parse and validate. Fails if effects.declare is
// not read, its variables not resolved or its entries not checked.
func TestEffectDeclarationsAreReadResolvedAndChecked(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`
facts:
  - provider: stripe
    type: charge_refunded
    on: [charge.refunded]
    resource: {type: customer, id: customer}
    fields: [id, amount_refunded]
effects:
  declare:
    - kind: receipt
      on_fact: invoice_paid
      url_env: RECEIPT_WEBHOOK_URL
    - kind: subscription_canceled
      on: {type: subscription, field: status, to: canceled}
      url: https://a.example.com/x
      url_env: CANCEL_URL
`), lookup(map[string]string{"RECEIPT_WEBHOOK_URL": "https://r.example.com/", "CANCEL_URL": "https://c.example.com/"}))
	require.NoError(t, err)
	require.Len(t, c.Effects.Declare, 2)
	require.Equal(t, "https://r.example.com/", c.Effects.Declare[0].URL)
	require.Equal(t, "https://c.example.com/", c.Effects.Declare[1].URL, "url_env wins over url")
	require.Equal(t, "canceled", c.Effects.Declare[1].On.To)
	require.Equal(t, "customer", c.Facts[0].Resource.Type)

	_, err = config.Parse([]byte(`
effects:
  declare:
    - kind: x
    - kind: y
      on: {type: subscription}
`), lookup(nil))
	require.ErrorContains(t, err, "effects.declare[0]: exactly one of on_fact and on is required")
	require.ErrorContains(t, err, "effects.declare[1].on: exactly one of to and deleted is required")

	raw, err := os.ReadFile("../../hookyard.example.yaml")
	require.NoError(t, err)
	var example struct {
		Facts   fact.Declarations `yaml:"facts"`
		Effects struct {
			Declare action.Effects `yaml:"declare"`
		} `yaml:"effects"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &example))
	require.NoError(t, example.Facts.Validate())
	require.NoError(t, example.Effects.Declare.Validate())
	// The example writes out the defaults: it declares what a config
	// without facts gets.
	require.Equal(t, fact.Declarations(nil).With(fact.Defaults), example.Facts.With(fact.Defaults))
}

// A declared effect's URL goes to another host as a receipt's does: outside
// dev, plain http to another host is refused naming the entry unless
// allowed. Fails if declared URLs skip the production check.
func TestDeclaredEffectURLsArePlainHTTPOnlyOnLoopbackOrWhenAllowed(t *testing.T) {
	t.Parallel()
	env := map[string]string{"OPS_TOKEN": "0123456789abcdef0123456789abcdef", "CANCEL_URL": "http://crm.internal/hook"}
	doc := "effects:\n  declare:\n    - kind: subscription_canceled\n      on: {type: subscription, to: canceled}\n      url_env: CANCEL_URL\n"
	c, err := config.Parse([]byte(doc), lookup(env))
	require.NoError(t, err)
	err = c.CheckProduction()
	require.ErrorIs(t, err, config.ErrDevDefault)
	require.ErrorContains(t, err, "effects.declare[0] (subscription_canceled) url is plain http")
	c, err = config.Parse([]byte(doc+"  allow_http: true\n"), lookup(env))
	require.NoError(t, err)
	require.NoError(t, c.CheckProduction())
	env["CANCEL_URL"] = "http://127.0.0.1:9/hook"
	c, err = config.Parse([]byte(doc), lookup(env))
	require.NoError(t, err)
	require.NoError(t, c.CheckProduction())
}

// An endpoint's project names only what its provider can project: a Stripe
// type the client cannot fetch, or a GitHub type but pull_request, is an
// error naming the endpoint's key, not a projection that never comes.
func TestProjectNamesOnlyWhatTheProviderProjects(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`
endpoints:
  - {id: a, provider: stripe, source_account: acct_a, environment: test, secrets: [whsec_a], project: [subscription, customer, invoice]}
  - {id: b, provider: chargebee, source_account: site, environment: test, secrets: ["u:p"], project: [customer]}
  - {id: n, provider: chargebee, source_account: site2, environment: test, secrets: ["u:p"], project: []}
`), lookup(nil))
	require.NoError(t, err)
	require.Equal(t, []string{"subscription", "customer", "invoice"}, c.Endpoints[0].Project)
	require.Equal(t, []string{"customer"}, c.Endpoints[1].Project)
	// An empty list projects nothing, unlike no list (the provider's default).
	require.NotNil(t, c.Endpoints[2].Project)
	require.False(t, c.Endpoints[2].Projects("subscription", nil))

	_, err = config.Parse([]byte(`
endpoints:
  - {id: a, provider: stripe, source_account: acct_a, environment: test, secrets: [whsec_a], project: [customer, discount]}
  - {id: c, provider: github, source_account: org, environment: prod, secrets: ["s"], project: [pull_request, issue]}
`), lookup(nil))
	require.ErrorContains(t, err, `endpoints[0].project[1] "discount" is not a Stripe object`)
	require.ErrorContains(t, err, `endpoints[1].project: GitHub "issue" is not projected; projectable: pull_request`)
	// Pull requests are: the processor fetches them.
	_, err = config.Parse([]byte(`
endpoints:
  - {id: c, provider: github, source_account: org, environment: prod, secrets: ["s"], project: [pull_request]}
`), lookup(nil))
	require.NoError(t, err)
}

// A Standard Webhooks endpoint's fetch API carries the sender's token and
// the resource's state: outside dev, plain http to another host is refused
// naming the endpoint; https and loopback pass. A URL without {id} is
// refused when the config is read. Fails if either check is removed.
func TestFetchURLIsCheckedAtStart(t *testing.T) {
	t.Parallel()
	env := map[string]string{"OPS_TOKEN": "0123456789abcdef0123456789abcdef"}
	doc := func(u string) []byte {
		return []byte("endpoints:\n  - id: sender\n    provider: standard-webhooks\n    source_account: a\n    environment: live\n" +
			"    secrets: [whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=]\n" +
			"    paths: {resource_id: data.id}\n    fetch: {url: \"" + u + "\", token_env: SENDER_API_TOKEN}\n")
	}
	c, err := config.Parse(doc("http://api.sender.example/v1/{id}"), lookup(env))
	require.NoError(t, err)
	err = c.CheckProduction()
	require.ErrorIs(t, err, config.ErrDevDefault)
	require.ErrorContains(t, err, `endpoints[0].fetch.url (endpoint "sender") is plain http`)
	for _, ok := range []string{"https://api.sender.example/v1/{id}", "http://127.0.0.1:9/v1/{type}s/{id}"} {
		c, err = config.Parse(doc(ok), lookup(env))
		require.NoError(t, err)
		require.NoError(t, c.CheckProduction(), ok)
	}
	_, err = config.Parse(doc("https://api.sender.example/v1/contacts"), lookup(env))
	require.ErrorContains(t, err, "fetch.url must contain {id}")
}

// A changes subscriber's URL and key come from their variables; a key the
// Standard Webhooks library cannot use refuses the config naming the entry
// and the variable; outside dev, plain http to another host is refused
// unless effects.allow_http. Fails if changes.subscribers skips the
// loading of its variables, the key check or the production check.
func TestChangesSubscribersComeFromTheirVariablesAndAreChecked(t *testing.T) {
	t.Parallel()
	key := "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	env := map[string]string{"OPS_TOKEN": "0123456789abcdef0123456789abcdef", "BILLING_URL": "http://billing.internal/changes", "BILLING_SECRET": key}
	doc := "changes:\n  subscribers:\n    - name: billing\n      url_env: BILLING_URL\n      secret_env: BILLING_SECRET\n      types: [subscription]\n"
	c, err := config.Parse([]byte(doc), lookup(env))
	require.NoError(t, err)
	require.Len(t, c.Changes.Subscribers, 1)
	require.Equal(t, "http://billing.internal/changes", c.Changes.Subscribers[0].URL)
	require.Equal(t, key, c.Changes.Subscribers[0].Secret)
	require.Equal(t, "change:billing", c.Changes.Subscribers[0].Kind())
	err = c.CheckProduction()
	require.ErrorIs(t, err, config.ErrDevDefault)
	require.ErrorContains(t, err, "changes.subscribers[0] (billing) url is plain http")
	c, err = config.Parse([]byte(doc+"effects:\n  allow_http: true\n"), lookup(env))
	require.NoError(t, err)
	require.NoError(t, c.CheckProduction())

	env["BILLING_SECRET"] = "whsec_c2hvcnQ="
	_, err = config.Parse([]byte(doc), lookup(env))
	require.ErrorContains(t, err, "changes.subscribers[0] (billing): secret from BILLING_SECRET")
	delete(env, "BILLING_SECRET")
	_, err = config.Parse([]byte(doc), lookup(env))
	require.ErrorContains(t, err, "changes.subscribers[0] (billing): secret from BILLING_SECRET: empty")
}

// A subscriber's signing key is read only by the services that sign
// (effects, the processor that also sends, dev): a receiver or a relay
// starts without it, the sender does not. Fails if every service asks for
// every subscriber's key.
func TestSubscriberKeysAreAskedOnlyOfServicesThatSign(t *testing.T) {
	t.Parallel()
	doc := []byte("changes:\n  subscribers:\n    - name: billing\n      url: https://billing.internal/changes\n      secret_env: BILLING_SECRET\n")
	for _, svc := range []string{"receiver", "outbox-relay", "reconciler", "api", "migrate"} {
		_, err := config.ParseService(doc, lookup(nil), svc)
		require.NoError(t, err, svc)
	}
	for _, svc := range []string{"effects", "processor", ""} {
		_, err := config.ParseService(doc, lookup(nil), svc)
		require.ErrorContains(t, err, "secret from BILLING_SECRET: empty", svc)
	}
}

// changes.publish: false turns the change stream off for every component
// (an empty changes topic), and refuses subscribers, who would receive
// nothing.
func TestChangeStreamCanBeTurnedOffAndThenRefusesSubscribers(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("kafka:\n  topic: t\n"), lookup(nil))
	require.NoError(t, err)
	require.Equal(t, config.ChangesTopicDefault, c.Kafka.ChangesTopic, "on by default")
	c, err = config.Parse([]byte("changes:\n  publish: false\n"), lookup(nil))
	require.NoError(t, err)
	require.Empty(t, c.Kafka.ChangesTopic)
	_, err = config.Parse([]byte("changes:\n  publish: false\n  subscribers:\n    - name: billing\n      url: https://billing.internal/changes\n      secret_env: BILLING_SECRET\n"),
		lookup(map[string]string{"BILLING_SECRET": "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}))
	require.ErrorContains(t, err, "changes.publish: false")
}
