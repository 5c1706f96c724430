package github

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/hookyard/hookyard/internal/apiguard"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
)

// PullRequest is the resource type of a pull request. Its id is
// "<repository id>#<number>": the repository's id, which a rename or a
// transfer keeps, and the number, which never changes.
const PullRequest = "pull_request"

// Projectable are the types a GitHub endpoint's `project` may name: those
// the Fetcher reads.
var Projectable = []string{PullRequest}

// Fetch quota per token. GitHub allows a token 5,000 requests an hour
// (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api),
// about 1.4 a second; the fetcher keeps below it, with room for bursts.
const (
	FetchRatePerSecondDefault = 1.0
	FetchBurstDefault         = 20
)

// TokenEnv is the environment variable of the token pull requests are
// fetched with when the endpoint's github_hook names none.
const TokenEnv = "GITHUB_API_TOKEN"

// PullRequestID is the resource id of pull request number of repository
// repoID.
func PullRequestID(repoID, number int64) string {
	return strconv.FormatInt(repoID, 10) + "#" + strconv.FormatInt(number, 10)
}

// pullEvents are the events whose payload carries the pull request they
// are about (https://docs.github.com/en/webhooks/webhook-events-and-payloads).
var pullEvents = map[string]bool{"pull_request": true, "pull_request_review": true, "pull_request_review_comment": true}

// pullFetcher reads pull requests with the token of the resource's own
// account and environment.
type pullFetcher struct {
	clients map[[2]string]*Client
}

// connectPulls builds the pull request fetcher of the GitHub endpoints
// that project pull requests: one client (limiter and breaker) per token.
// An endpoint without a token is refused, as is an App's hook, whose
// installation tokens are not minted yet.
func connectPulls(eps []provider.Endpoint, opts provider.APIOptions) (*pullFetcher, error) {
	f := &pullFetcher{clients: map[[2]string]*Client{}}
	byToken := map[string]*Client{}
	for i := range eps {
		ep := &eps[i]
		if ep.Provider != provider.GitHub || !ep.Projects(PullRequest, []string{}) {
			continue
		}
		token := os.Getenv(TokenEnv)
		if h := ep.GitHubHook; h != nil {
			if h.AppID != "" {
				return nil, fmt.Errorf("endpoint %q: project: pull requests of a GitHub App's hook need installation tokens, which hookyard does not mint yet", ep.ID)
			}
			token = cmp.Or(h.Token, token)
		}
		if token == "" {
			return nil, fmt.Errorf("endpoint %q: project: pull requests are fetched with github_hook.token or %s; neither is set", ep.ID, TokenEnv)
		}
		key := [2]string{ep.SourceAccount, ep.Environment}
		cl, ok := byToken[token]
		if !ok {
			cl = newTokenClient(opts.BaseURL, token, opts.Log)
			byToken[token] = cl
		}
		if prev, ok := f.clients[key]; ok && prev != cl {
			return nil, fmt.Errorf("endpoint %q: another GitHub endpoint of %s/%s fetches with another token", ep.ID, key[0], key[1])
		}
		f.clients[key] = cl
	}
	if len(f.clients) == 0 {
		return nil, nil
	}
	return f, nil
}

// newTokenClient is a client that reads with token, under its own limiter
// and breaker.
func newTokenClient(base, token string, log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := APIConfig{BaseURL: strings.TrimRight(cmp.Or(base, APIBaseDefault), "/"), Timeout: APITimeoutDefault,
		RatePerSecond: FetchRatePerSecondDefault, Burst: FetchBurstDefault, HTTPClient: http.DefaultClient}
	return &Client{cfg: cfg, hook: Hook{Token: token}, log: log,
		guard: apiguard.New(apiguard.Config{Name: "github fetch", RatePerSecond: cfg.RatePerSecond, Burst: cfg.Burst, Healthy: healthy})}
}

// healthy: any answer but 5xx and rate limits says GitHub is healthy.
func healthy(err error) bool {
	return err == nil || !(errors.Is(err, ErrServer) || errors.Is(err, ErrRateLimited) || !isStatus(err))
}

// Fetch implements provider.Fetcher: GET /repositories/{repo id}/pulls/{number},
// the repository addressed by its id, which GitHub's REST API accepts as
// /repos/{owner}/{repo} and which a rename keeps. A 404 (missing, or a
// repository the token may not see) is provider.ErrNotFound and never a
// state: pull requests are closed, never deleted. The status is "merged",
// else the pull request's state ("open", "closed").
func (f *pullFetcher) Fetch(ctx context.Context, r message.Resource) (provider.Fetched, error) {
	if r.Type != PullRequest {
		return provider.Fetched{}, fmt.Errorf("fetch github %s %s: not a type hookyard fetches", r.Type, r.ID)
	}
	cl, ok := f.clients[[2]string{r.SourceAccount, r.Environment}]
	if !ok {
		return provider.Fetched{}, fmt.Errorf("fetch github %s %s: no token for %s/%s", r.Type, r.ID, r.SourceAccount, r.Environment)
	}
	repo, num, ok := strings.Cut(r.ID, "#")
	repoID, err1 := strconv.ParseInt(repo, 10, 64)
	number, err2 := strconv.ParseInt(num, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return provider.Fetched{}, fmt.Errorf("fetch github %s %s: the id is not <repository id>#<number>", r.Type, r.ID)
	}
	p := fmt.Sprintf("/repositories/%d/pulls/%d", repoID, number)
	var body []byte
	err := cl.guard.Do(ctx, "GET "+p, func() error {
		var err error
		body, _, err = cl.send(ctx, http.MethodGet, p, http.StatusOK)
		return err
	})
	switch {
	case errors.Is(err, apiguard.ErrUnavailable) || errors.Is(err, apiguard.ErrLimited):
		return provider.Fetched{}, fmt.Errorf("fetch github %s %s: %w: %w", r.Type, r.ID, provider.ErrNotAttempted, err)
	case errors.Is(err, ErrNotFound):
		return provider.Fetched{}, fmt.Errorf("fetch github %s %s: %w: %w", r.Type, r.ID, provider.ErrNotFound, err)
	case err != nil:
		return provider.Fetched{}, fmt.Errorf("fetch github %s %s: %w", r.Type, r.ID, err)
	}
	var pr struct {
		Number   int64   `json:"number"`
		State    string  `json:"state"`
		MergedAt *string `json:"merged_at"`
		Base     struct {
			Repo struct {
				ID int64 `json:"id"`
			} `json:"repo"`
		} `json:"base"`
	}
	if err := json.Unmarshal(body, &pr); err != nil || pr.Number != number || pr.Base.Repo.ID != repoID {
		return provider.Fetched{}, fmt.Errorf("fetch github %s %s: unexpected response", r.Type, r.ID)
	}
	status := pr.State
	if pr.MergedAt != nil {
		status = "merged"
	}
	return provider.Fetched{State: body, Status: status}, nil
}

// connection is GitHub's Connection: the pull request fetcher, and the
// reconciler's walk of each endpoint's hook deliveries.
type connection struct {
	pulls  *pullFetcher
	source provider.SourceFunc
}

// Fetcher implements provider.Connection.
func (c connection) Fetcher() provider.Fetcher {
	if c.pulls == nil {
		return nil
	}
	return c.pulls
}

// Source implements provider.Connection.
func (c connection) Source(ep *provider.Endpoint) (*provider.Source, error) { return c.source(ep) }
