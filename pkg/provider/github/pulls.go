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
// the Fetcher reads. Installation needs an App's hook (github_hook.app_id).
var Projectable = []string{PullRequest, Installation}

// Fetch quota per credential (a token, an App's JWT, an installation's
// token). GitHub allows each 5,000 requests an hour or more
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

// fetcher reads pull requests and installations with the credentials of
// the resource's own account and environment: a token, or an App.
type fetcher struct {
	creds map[[2]string]credentials
}

// credentials are one account's and environment's: a token client (a
// repository or organization hook's token, or GITHUB_API_TOKEN), or an App
// that mints installation tokens.
type credentials struct {
	token *Client
	app   *app
}

// connectFetch builds the fetcher of the GitHub endpoints that project
// pull requests or installations: one limiter and breaker per token, per
// App (its JWT's calls) and per installation (its token's calls). An
// endpoint of a token hook without a token is refused.
func connectFetch(eps []provider.Endpoint, opts provider.APIOptions) (*fetcher, error) {
	f := &fetcher{creds: map[[2]string]credentials{}}
	byToken := map[string]*Client{}
	byApp := map[string]*app{}
	for i := range eps {
		ep := &eps[i]
		if ep.Provider != provider.GitHub || (!ep.Projects(PullRequest, []string{}) && !ep.Projects(Installation, []string{})) {
			continue
		}
		var c credentials
		if h := ep.GitHubHook; h != nil && h.AppID != "" {
			k := h.AppID + "\x00" + h.PrivateKey
			if c.app = byApp[k]; c.app == nil {
				a, err := newApp(h.AppID, h.PrivateKey, opts)
				if err != nil {
					return nil, fmt.Errorf("endpoint %q: %w", ep.ID, err)
				}
				c.app, byApp[k] = a, a
			}
		} else {
			if ep.Projects(Installation, []string{}) {
				return nil, fmt.Errorf("endpoint %q: project: installations are read with a GitHub App's JWT: github_hook needs app_id and private_key", ep.ID)
			}
			token := os.Getenv(TokenEnv)
			if h != nil {
				token = cmp.Or(h.Token, token)
			}
			if token == "" {
				return nil, fmt.Errorf("endpoint %q: project: pull requests are fetched with github_hook.token or %s; neither is set", ep.ID, TokenEnv)
			}
			if c.token = byToken[token]; c.token == nil {
				c.token = newTokenClient(opts.BaseURL, token, opts.Log)
				byToken[token] = c.token
			}
		}
		key := [2]string{ep.SourceAccount, ep.Environment}
		if prev, ok := f.creds[key]; ok && prev != c {
			return nil, fmt.Errorf("endpoint %q: another GitHub endpoint of %s/%s fetches with other credentials", ep.ID, key[0], key[1])
		}
		f.creds[key] = c
	}
	if len(f.creds) == 0 {
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

// Fetch implements provider.Fetcher: a pull request (fetchPull) or an
// installation (app.fetchInstallation).
func (f *fetcher) Fetch(ctx context.Context, r message.Resource) (provider.Fetched, error) {
	c, ok := f.creds[[2]string{r.SourceAccount, r.Environment}]
	if !ok {
		return provider.Fetched{}, fmt.Errorf("fetch github %s %s: no credentials for %s/%s", r.Type, r.ID, r.SourceAccount, r.Environment)
	}
	var out provider.Fetched
	var err error
	switch r.Type {
	case PullRequest:
		out, err = c.fetchPull(ctx, r.ID)
	case Installation:
		if c.app == nil {
			return provider.Fetched{}, fmt.Errorf("fetch github %s %s: installations are read with an App's JWT; %s/%s has no App", r.Type, r.ID, r.SourceAccount, r.Environment)
		}
		id, perr := strconv.ParseInt(r.ID, 10, 64)
		if perr != nil || id <= 0 {
			return provider.Fetched{}, fmt.Errorf("fetch github %s %s: the id is not an installation id", r.Type, r.ID)
		}
		out, err = c.app.fetchInstallation(ctx, id)
	default:
		return provider.Fetched{}, fmt.Errorf("fetch github %s %s: not a type hookyard fetches", r.Type, r.ID)
	}
	switch {
	case errors.Is(err, apiguard.ErrUnavailable) || errors.Is(err, apiguard.ErrLimited):
		return provider.Fetched{}, fmt.Errorf("fetch github %s %s: %w: %w", r.Type, r.ID, provider.ErrNotAttempted, err)
	case errors.Is(err, ErrNotFound):
		return provider.Fetched{}, fmt.Errorf("fetch github %s %s: %w: %w", r.Type, r.ID, provider.ErrNotFound, err)
	case err != nil:
		return provider.Fetched{}, fmt.Errorf("fetch github %s %s: %w", r.Type, r.ID, err)
	}
	return out, nil
}

// fetchPull reads pull request id ("<repository id>#<number>") with
// GET /repositories/{repo id}/pulls/{number}, the repository addressed by
// its id, which GitHub's REST API accepts as /repos/{owner}/{repo} and
// which a rename keeps: with the token, or with the installation token of
// the App's installation on the repository. A 404 (missing, or a
// repository the credentials may not see) is ErrNotFound and never a
// state: pull requests are closed, never deleted. The status is "merged",
// else the pull request's state ("open", "closed").
func (c credentials) fetchPull(ctx context.Context, id string) (provider.Fetched, error) {
	repo, num, ok := strings.Cut(id, "#")
	repoID, err1 := strconv.ParseInt(repo, 10, 64)
	number, err2 := strconv.ParseInt(num, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return provider.Fetched{}, errors.New("the id is not <repository id>#<number>")
	}
	p := fmt.Sprintf("/repositories/%d/pulls/%d", repoID, number)
	var body []byte
	var err error
	if c.app != nil {
		body, err = c.app.getAsInstallation(ctx, repoID, p)
	} else {
		err = c.token.guard.Do(ctx, "GET "+p, func() error {
			var err error
			body, _, err = c.token.send(ctx, http.MethodGet, p, http.StatusOK)
			return err
		})
	}
	if err != nil {
		return provider.Fetched{}, err
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
		return provider.Fetched{}, errors.New("unexpected response")
	}
	status := pr.State
	if pr.MergedAt != nil {
		status = "merged"
	}
	return provider.Fetched{State: body, Status: status}, nil
}

// connection is GitHub's Connection: the fetcher, and the
// reconciler's walk of each endpoint's hook deliveries.
type connection struct {
	pulls  *fetcher
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
