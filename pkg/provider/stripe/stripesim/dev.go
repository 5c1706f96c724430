package stripesim

import (
	"cmp"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Dev is the Stripe simulator as `hookyard dev` serves it when
// STRIPE_API_BASE is unset (provider.DevSimulator).
type Dev struct{}

// Simulate serves a simulator at the root, delivering to the endpoint
// "stripe-dev" (the example config's) with the first Stripe endpoint's
// first secret, and accepting the key that endpoint reads with (its
// api_key, else STRIPE_API_KEY). It is served even with no Stripe endpoint:
// STRIPE_API_BASE then points nowhere else.
func (Dev) Simulate(eps []provider.Endpoint, opts provider.DevOptions) *provider.Simulation {
	var secret, key string
	for i := range eps {
		if ep := &eps[i]; ep.Provider == provider.Stripe && len(ep.Secrets) > 0 {
			secret, key = ep.Secrets[0], cmp.Or(ep.APIKey, opts.APIKey)
			break
		}
	}
	sim := New(Config{WebhookURL: opts.WebhookBase + "/webhooks/stripe-dev", WebhookSecret: secret})
	if key != "" {
		// The simulator stands in for the Stripe endpoint's account: it
		// accepts the key the endpoint reads with (the dev default, or
		// STRIPE_API_KEY when set).
		sim.AddKey(key, DevAccount)
	}
	return &provider.Simulation{Handler: sim, Root: true}
}
