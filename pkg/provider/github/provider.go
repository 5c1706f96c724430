package github

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Provider is GitHub's adapter for package registry: Verifier's Verify,
// Interpret, and the API (Connect) and endpoint checks (CheckEndpoint)
// capabilities.
type Provider struct{ Verifier }

// Name implements provider.Provider.
func (Provider) Name() string { return provider.GitHub }

// Interpret implements provider.Interpreter: an event about a pull
// request or an installation (Verify keys it so only when the endpoint
// projects that type) is a hint to fetch it; every other event is
// recorded.
func (Provider) Interpret(ev provider.StoredEvent, ep *provider.Endpoint) (provider.Plan, error) {
	if (ev.ResourceType == PullRequest || ev.ResourceType == Installation) && ev.ResourceID != "" && ep.Projects(ev.ResourceType, []string{}) {
		return provider.Plan{Fetch: true}, nil
	}
	return provider.Plan{}, nil
}

// EndpointKeys implements provider.EndpointChecker.
func (Provider) EndpointKeys() []string { return []string{"github_hook"} }

// CheckEndpoint implements provider.EndpointChecker: github_hook names one
// hook, and an App's key parses.
func (Provider) CheckEndpoint(ep *provider.Endpoint) []error {
	for _, t := range ep.Project {
		if !slices.Contains(Projectable, t) {
			// A type nothing fetches would promise projections that never come.
			return []error{fmt.Errorf("project: GitHub %q is not projected; projectable: %s", t, strings.Join(Projectable, ", "))}
		}
	}
	if ep.Projects(Installation, []string{}) && (ep.GitHubHook == nil || ep.GitHubHook.AppID == "") {
		// Only an App reads its installations (with its JWT); a token
		// hook's endpoint would promise projections that never come.
		return []error{fmt.Errorf("project: GitHub %q needs an App's hook (github_hook.app_id and private_key)", Installation)}
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

// Connect implements provider.Connector. The processor fetches the pull
// requests and installations of the endpoints that project them
// (connectFetch), at
// opts.BaseURL (GITHUB_API_BASE, else GitHub's); the reconciler walks the
// deliveries of each endpoint's github_hook there, at opts.ReconcileRate
// (reconciler.github_rate), and asks again for the failed ones.
func (Provider) Connect(eps []provider.Endpoint, opts provider.APIOptions) (provider.Connection, error) {
	pulls, err := connectFetch(eps, opts)
	if err != nil {
		return nil, err
	}
	return connection{pulls: pulls, source: func(ep *provider.Endpoint) (*provider.Source, error) {
		if ep.GitHubHook == nil {
			return nil, nil
		}
		cl, err := NewClient(APIConfig{BaseURL: opts.BaseURL, RatePerSecond: opts.ReconcileRate}, *ep.GitHubHook, opts.Log)
		if err != nil {
			return nil, err
		}
		return &provider.Source{Provider: provider.GitHub, SourceAccount: ep.SourceAccount,
			Environment: ep.Environment, Endpoint: ep, Hooks: Deliveries{Client: cl}, Listing: hookListing(*ep.GitHubHook)}, nil
	}}, nil
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
