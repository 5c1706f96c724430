package config

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/provider"
)

// OpsTokenMinLen is the shortest ops token a service outside `hookyard dev`
// accepts: 32 bytes, e.g. `openssl rand -hex 16`.
const OpsTokenMinLen = 32

// WebhookSecretMinLen is the shortest webhook secret a service outside
// `hookyard dev` accepts, counted with spaces trimmed and without a known
// prefix (whsec_), and of Chargebee's "username:password" the password:
// what is left is what a forger must guess.
const WebhookSecretMinLen = 16

// DevSecrets are the fallback values of hookyard.example.yaml's secrets and
// API keys, with the variable that overrides each. They authenticate
// anybody who has read the repository (the API keys are the simulators'),
// so no service outside `hookyard dev` starts with one. A test keeps this
// list in step with the example file.
var DevSecrets = map[string]string{
	"whsec_hookyard_dev_stripe":                              "STRIPE_WEBHOOK_SECRET",
	"hookyard-dev-password":                                  "CHARGEBEE_WEBHOOK_PASSWORD",
	"hookyard-dev-github-secret":                             "GITHUB_WEBHOOK_SECRET",
	"whsec_aG9va3lhcmQtZGV2LXN0YW5kYXJkLXdlYmhvb2tzLWtleQ==": "STANDARD_WEBHOOK_SECRET",
	"ghp_hookyard_dev":                                       "GITHUB_TOKEN",
	StripeAPIKeyDevDefault:                                   "STRIPE_API_KEY",
	OpsAppTokenDevDefault:                                    "OPS_APP_TOKEN",
	"cb_test_hookyard_dev":                                   "CHARGEBEE_API_KEY",
}

// ErrDevDefault is returned by CheckProduction for a setting that only
// `hookyard dev` may run with.
var ErrDevDefault = errors.New("dev default outside hookyard dev")

// ErrWeakSecret is returned by CheckProduction for a webhook secret shorter
// than WebhookSecretMinLen.
var ErrWeakSecret = errors.New("weak webhook secret")

// reads is what a service reads besides the database and the config's
// public settings.
type reads struct {
	// webhookSecrets: it verifies deliveries with the endpoints' secrets.
	webhookSecrets bool
	// apiKeys: it reads the providers' APIs (Stripe fetches, listings).
	apiKeys bool
	// opsToken: it serves the query/ops API.
	opsToken bool
	// subscriberSecrets: it signs changes for their subscribers (the
	// effects sender, which the processor also runs).
	subscriberSecrets bool
}

// serviceReads derives from internal/cli what each long-running service,
// migrate and changes use: only the receiver verifies signatures, only the
// processor (fetching hints) and the reconciler (listing) call provider
// APIs, only the api serves the ops API. A name not here (dev, the ops
// commands, a new one) reads everything.
var serviceReads = map[string]reads{
	"receiver":     {webhookSecrets: true},
	"processor":    {apiKeys: true, subscriberSecrets: true},
	"reconciler":   {apiKeys: true},
	"api":          {opsToken: true},
	"outbox-relay": {},
	"effects":      {subscriberSecrets: true},
	"migrate":      {},
	"changes":      {}, // reads the changes topic only
}

func readsOf(service string) reads {
	if r, ok := serviceReads[service]; ok {
		return r
	}
	return reads{webhookSecrets: true, apiKeys: true, opsToken: true, subscriberSecrets: true}
}

// secretKey is the part of an endpoint secret a forger must guess: spaces
// trimmed, without the whsec_ prefix Stripe and Standard Webhooks put on
// theirs, and of Chargebee's "username:password" the password.
func secretKey(providerName, s string) string {
	if providerName == provider.Chargebee {
		_, s, _ = strings.Cut(s, ":")
	}
	s = strings.TrimSpace(s)
	return strings.TrimSpace(strings.TrimPrefix(s, "whsec_"))
}

// ApplyDevDefaults fills in what only `hookyard dev` may run with when it is
// unset: the dev ops token and the Stripe API key its simulator accepts.
func (c *Config) ApplyDevDefaults() {
	c.OpsToken = cmp.Or(c.OpsToken, OpsTokenDevDefault)
	c.StripeAPIKey = cmp.Or(c.StripeAPIKey, StripeAPIKeyDevDefault)
}

// CheckProduction refuses what only `hookyard dev` may run with, for every
// service at once: no ops token, a short one or the dev token, endpoint
// secrets, API keys and scoped ops tokens from the example config's dev
// fallbacks, a scoped ops token shorter than OpsTokenMinLen, a webhook
// secret shorter than WebhookSecretMinLen, a Stripe endpoint without an API
// key, and a plain http receipt or fetch URL to another host. Each error names the
// variable to set. It is CheckService("").
func (c *Config) CheckProduction() error { return c.CheckService("") }

// CheckService is CheckProduction for the one service that is starting
// (the subcommand): it asks only for what that service reads. Only `api`
// needs OPS_TOKEN, only the receiver webhook secrets, only the processor and
// the reconciler API keys. Dev fallbacks are refused in every service
// whatever it reads: a service on the example config is misconfigured.
func (c *Config) CheckService(service string) error {
	r := readsOf(service)
	var errs []error
	if r.opsToken {
		switch {
		case c.OpsToken == "":
			errs = append(errs, fmt.Errorf("%w: OPS_TOKEN (or OPS_TOKEN_FILE) is unset; set a random token of at least %d bytes", ErrDevDefault, OpsTokenMinLen))
		case c.OpsToken == OpsTokenDevDefault:
			errs = append(errs, fmt.Errorf("%w: OPS_TOKEN is the dev token; set a random token of at least %d bytes", ErrDevDefault, OpsTokenMinLen))
		case len(c.OpsToken) < OpsTokenMinLen:
			errs = append(errs, fmt.Errorf("%w: OPS_TOKEN is %d bytes; it must have at least %d", ErrDevDefault, len(c.OpsToken), OpsTokenMinLen))
		}
	}
	for i, t := range c.Ops.Tokens {
		switch err := checkOpsToken(fmt.Sprintf("ops.tokens[%d] (%q)", i, t.Name), t.Token); {
		case r.opsToken && err != nil:
			errs = append(errs, err)
		case DevSecrets[t.Token] != "":
			// Like every dev fallback: a service on the example config is
			// misconfigured, whether it reads the token or not.
			errs = append(errs, fmt.Errorf("%w: ops.tokens[%d] (%q) is the example config's dev token; set %s",
				ErrDevDefault, i, t.Name, DevSecrets[t.Token]))
		}
	}
	if v, dev := DevSecrets[c.StripeAPIKey]; dev {
		errs = append(errs, fmt.Errorf("%w: STRIPE_API_KEY is the example config's dev key; set %s", ErrDevDefault, v))
	}
	for i, ep := range c.Endpoints {
		if h := ep.GitHubHook; h != nil {
			if v, dev := DevSecrets[h.Token]; dev {
				errs = append(errs, fmt.Errorf("%w: endpoints[%d].github_hook.token (endpoint %q) is the example config's dev token; set %s",
					ErrDevDefault, i, ep.ID, v))
			}
		}
		if f := ep.Fetch; f != nil && strings.HasPrefix(strings.ToLower(f.URL), "http:") && !action.IsLoopback(f.URL) {
			// The token and the resource's state would cross the network in clear.
			errs = append(errs, fmt.Errorf("%w: endpoints[%d].fetch.url (endpoint %q) is plain http to another host; use https",
				ErrDevDefault, i, ep.ID))
		}
		if v, dev := DevSecrets[ep.APIKey]; dev {
			errs = append(errs, fmt.Errorf("%w: endpoints[%d].api_key (endpoint %q) is the example config's dev key; set %s",
				ErrDevDefault, i, ep.ID, v))
		}
		if r.apiKeys && ep.Provider == provider.Stripe && ep.APIKey == "" && c.StripeAPIKey == "" {
			// The processor would fetch nothing and the reconciler list
			// nothing; say so at start rather than on the first hint.
			errs = append(errs, fmt.Errorf("config: endpoints[%d] (endpoint %q) has no api_key and STRIPE_API_KEY is unset", i, ep.ID))
		}
		for j, s := range ep.Secrets {
			dev := false
			for _, part := range append([]string{s}, strings.Split(s, ":")...) {
				if v, ok := DevSecrets[part]; ok {
					errs = append(errs, fmt.Errorf("%w: endpoints[%d].secrets[%d] (endpoint %q) is the example config's dev secret; set %s",
						ErrDevDefault, i, j, ep.ID, v))
					dev = true
					break
				}
			}
			if k := secretKey(ep.Provider, s); r.webhookSecrets && !dev && len(k) < WebhookSecretMinLen {
				what := "secret"
				if ep.Provider == provider.Chargebee {
					what = "password"
				}
				errs = append(errs, fmt.Errorf("%w: endpoints[%d].secrets[%d] (endpoint %q): its %s is %d bytes without spaces and prefix; use at least %d bytes, e.g. openssl rand -hex 32",
					ErrWeakSecret, i, j, ep.ID, what, len(k), WebhookSecretMinLen))
			}
		}
	}
	if u := c.Effects.ReceiptURL; u != "" && strings.HasPrefix(strings.ToLower(u), "http:") && !c.Effects.AllowHTTP && !action.IsLoopback(u) {
		// A receipt carries the invoice (customer, amounts) to another host.
		errs = append(errs, fmt.Errorf("%w: RECEIPT_WEBHOOK_URL (effects.receipt_url) is plain http to another host; use https, or set effects.allow_http", ErrDevDefault))
	}
	for i, ef := range c.Effects.Declare {
		if u := ef.URL; u != "" && strings.HasPrefix(strings.ToLower(u), "http:") && !c.Effects.AllowHTTP && !action.IsLoopback(u) {
			errs = append(errs, fmt.Errorf("%w: effects.declare[%d] (%s) url is plain http to another host; use https, or set effects.allow_http", ErrDevDefault, i, ef.Kind))
		}
	}
	for i, sub := range c.Changes.Subscribers {
		// A change carries the resource's state to another host.
		if u := sub.URL; u != "" && strings.HasPrefix(strings.ToLower(u), "http:") && !c.Effects.AllowHTTP && !action.IsLoopback(u) {
			errs = append(errs, fmt.Errorf("%w: changes.subscribers[%d] (%s) url is plain http to another host; use https, or set effects.allow_http", ErrDevDefault, i, sub.Name))
		}
	}
	// The identity floor holds outside `hookyard dev` only: dev may shorten
	// every horizon to watch retention work (make bench's soak does).
	if rt := c.Retention; rt.IdentityAge != 0 && rt.IdentityAge < IdentityAgeMin {
		errs = append(errs, fmt.Errorf("config: retention.identity_age %s is below %s: providers redeliver for up to 3 days, "+
			"and an event redelivered after its identity is forgotten is taken as new", rt.IdentityAge, IdentityAgeMin))
	}
	if rt := c.Retention; rt.DeliveryAge != 0 && rt.DeliveryAge < DeliveryAgeMin {
		errs = append(errs, fmt.Errorf("config: retention.delivery_age %s is below %s: a change the subscriber feeder reads again "+
			"(its group's offsets forgotten by Kafka) after its delivery is deleted is delivered again", rt.DeliveryAge, DeliveryAgeMin))
	}
	return errors.Join(errs...)
}
