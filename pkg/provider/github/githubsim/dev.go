package githubsim

import "github.com/hookyard/hookyard/pkg/provider"

// Dev is the GitHub simulator as `hookyard dev` serves it when
// GITHUB_API_BASE is unset (provider.DevSimulator).
type Dev struct{}

// Simulate simulates the hook of the first GitHub endpoint that names one
// (github_hook) and has a secret; nil when none does.
func (Dev) Simulate(eps []provider.Endpoint, opts provider.DevOptions) *provider.Simulation {
	for i := range eps {
		ep := &eps[i]
		if ep.Provider != provider.GitHub || ep.GitHubHook == nil || len(ep.Secrets) == 0 {
			continue
		}
		h := ep.GitHubHook
		sim := New(Config{WebhookURL: opts.WebhookBase + "/webhooks/" + ep.ID,
			Secret: ep.Secrets[0], Repo: h.Repo, Org: h.Org, HookID: h.HookID, Token: h.Token, AppID: h.AppID, AppKey: h.PrivateKey})
		return &provider.Simulation{Handler: sim}
	}
	return nil
}
