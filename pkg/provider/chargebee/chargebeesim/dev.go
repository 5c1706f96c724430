package chargebeesim

import (
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Dev is the Chargebee simulator as `hookyard dev` serves it
// (provider.DevSimulator).
type Dev struct{}

// Simulate simulates the site of the first Chargebee endpoint with an
// api_key, no site and a secret; nil when none has.
func (Dev) Simulate(eps []provider.Endpoint, opts provider.DevOptions) *provider.Simulation {
	for i := range eps {
		ep := &eps[i]
		if ep.Provider != provider.Chargebee || ep.APIKey == "" || ep.Site != "" || len(ep.Secrets) == 0 {
			continue
		}
		user, pass, _ := strings.Cut(ep.Secrets[0], ":")
		sim := New(Config{WebhookURL: opts.WebhookBase + "/webhooks/" + ep.ID,
			Username: user, Password: pass, APIKey: ep.APIKey})
		return &provider.Simulation{Handler: sim, Endpoints: []string{ep.ID}}
	}
	return nil
}
