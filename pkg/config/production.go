package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hookyard/hookyard/pkg/action"
)

// OpsTokenMinLen is the shortest ops token a service outside `hookyard dev`
// accepts: 32 bytes, e.g. `openssl rand -hex 16`.
const OpsTokenMinLen = 32

// DevSecrets are the fallback values of hookyard.example.yaml's secrets, with
// the variable that overrides each. They authenticate anybody who has read
// the repository, so no service outside `hookyard dev` starts with one. A
// test keeps this list in step with the example file.
var DevSecrets = map[string]string{
	"whsec_hookyard_dev_stripe":                              "STRIPE_WEBHOOK_SECRET",
	"hookyard-dev-password":                                  "CHARGEBEE_WEBHOOK_PASSWORD",
	"hookyard-dev-github-secret":                             "GITHUB_WEBHOOK_SECRET",
	"whsec_aG9va3lhcmQtZGV2LXN0YW5kYXJkLXdlYmhvb2tzLWtleQ==": "STANDARD_WEBHOOK_SECRET",
	"ghp_hookyard_dev":                                       "GITHUB_TOKEN",
}

// ErrDevDefault is returned by CheckProduction for a setting that only
// `hookyard dev` may run with.
var ErrDevDefault = errors.New("dev default outside hookyard dev")

// CheckProduction refuses what only `hookyard dev` may run with: no ops
// token, a short one or the dev token, endpoint secrets from the example
// config's dev fallbacks, and a plain http receipt URL to another host. Each error names the variable to set.
func (c *Config) CheckProduction() error {
	var errs []error
	switch {
	case c.OpsToken == "":
		errs = append(errs, fmt.Errorf("%w: OPS_TOKEN (or OPS_TOKEN_FILE) is unset; set a random token of at least %d bytes", ErrDevDefault, OpsTokenMinLen))
	case c.OpsToken == OpsTokenDevDefault:
		errs = append(errs, fmt.Errorf("%w: OPS_TOKEN is the dev token; set a random token of at least %d bytes", ErrDevDefault, OpsTokenMinLen))
	case len(c.OpsToken) < OpsTokenMinLen:
		errs = append(errs, fmt.Errorf("%w: OPS_TOKEN is %d bytes; it must have at least %d", ErrDevDefault, len(c.OpsToken), OpsTokenMinLen))
	}
	for i, ep := range c.Endpoints {
		if h := ep.GitHubHook; h != nil {
			if v, dev := DevSecrets[h.Token]; dev {
				errs = append(errs, fmt.Errorf("%w: endpoints[%d].github_hook.token (endpoint %q) is the example config's dev token; set %s",
					ErrDevDefault, i, ep.ID, v))
			}
		}
		for j, s := range ep.Secrets {
			for _, part := range append([]string{s}, strings.Split(s, ":")...) {
				if v, dev := DevSecrets[part]; dev {
					errs = append(errs, fmt.Errorf("%w: endpoints[%d].secrets[%d] (endpoint %q) is the example config's dev secret; set %s",
						ErrDevDefault, i, j, ep.ID, v))
					break
				}
			}
		}
	}
	if u := c.Effects.ReceiptURL; u != "" && strings.HasPrefix(strings.ToLower(u), "http:") && !c.Effects.AllowHTTP && !action.IsLoopback(u) {
		// A receipt carries the invoice (customer, amounts) to another host.
		errs = append(errs, fmt.Errorf("%w: RECEIPT_WEBHOOK_URL (effects.receipt_url) is plain http to another host; use https, or set effects.allow_http", ErrDevDefault))
	}
	return errors.Join(errs...)
}
