package github

import (
	"fmt"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Provider is GitHub's adapter for package registry: Verifier's Verify,
// Interpret, and the API (Connect) and endpoint checks (CheckEndpoint)
// capabilities.
type Provider struct{ Verifier }

// Name implements provider.Provider.
func (Provider) Name() string { return provider.GitHub }

// Interpret implements provider.Interpreter: GitHub events are recorded;
// none of them is projected.
func (Provider) Interpret(provider.StoredEvent, *provider.Endpoint) (provider.Plan, error) {
	return provider.Plan{}, nil
}

// EndpointKeys implements provider.EndpointChecker.
func (Provider) EndpointKeys() []string { return []string{"github_hook"} }

// CheckEndpoint implements provider.EndpointChecker: github_hook names one
// hook, and an App's key parses.
func (Provider) CheckEndpoint(ep *provider.Endpoint) []error {
	if len(ep.Project) > 0 {
		// Nothing of GitHub's is projected yet: a list would promise
		// projections that never come.
		return []error{fmt.Errorf("project: GitHub resources are not projected (events are stored, facts and effects apply)")}
	}
	if ep.GitHubHook == nil {
		return nil
	}
	if _, err := HookPath(*ep.GitHubHook); err != nil {
		return []error{fmt.Errorf("github_hook: %w", err)}
	}
	if ep.GitHubHook.AppID != "" {
		if _, err := ParseAppKey(ep.GitHubHook.PrivateKey); err != nil {
			return []error{fmt.Errorf("github_hook: %w", err)}
		}
	}
	return nil
}

// Connect implements provider.Connector. The processor reads nothing from
// GitHub; the reconciler walks the deliveries of each endpoint's
// github_hook at opts.BaseURL (GITHUB_API_BASE, else GitHub's), at
// opts.ReconcileRate (reconciler.github_rate), and asks again for the
// failed ones.
func (Provider) Connect(_ []provider.Endpoint, opts provider.APIOptions) (provider.Connection, error) {
	return provider.SourceFunc(func(ep *provider.Endpoint) (*provider.Source, error) {
		if ep.GitHubHook == nil {
			return nil, nil
		}
		cl, err := NewClient(APIConfig{BaseURL: opts.BaseURL, RatePerSecond: opts.ReconcileRate}, *ep.GitHubHook, opts.Log)
		if err != nil {
			return nil, err
		}
		return &provider.Source{Provider: provider.GitHub, SourceAccount: ep.SourceAccount,
			Environment: ep.Environment, Endpoint: ep, Hooks: Deliveries{Client: cl}, Listing: hookListing(*ep.GitHubHook)}, nil
	}), nil
}

// hookListing names a hook's deliveries listing: deliveries are listed per
// hook, so every hook of an account is walked, and endpoints sharing one
// hook are walked once.
func hookListing(h provider.GitHubHook) string {
	switch {
	case h.AppID != "":
		return "app:" + h.AppID
	case h.Org != "":
		return fmt.Sprintf("org:%s#%d", h.Org, h.HookID)
	default:
		return fmt.Sprintf("repo:%s#%d", h.Repo, h.HookID)
	}
}

// KnownEventTypes implements provider.EventTyper: GitHub's common webhook
// events, each with any action
// (https://docs.github.com/en/webhooks/webhook-events-and-payloads).
func (Provider) KnownEventTypes() []string {
	return []string{"ping", "push", "create", "delete", "fork", "issues.*", "issue_comment.*", "pull_request.*",
		"pull_request_review.*", "pull_request_review_comment.*", "release.*", "repository.*", "member.*",
		"membership.*", "organization.*", "installation.*", "installation_repositories.*", "check_run.*",
		"check_suite.*", "workflow_run.*", "workflow_job.*", "star.*", "meta.*"}
}
