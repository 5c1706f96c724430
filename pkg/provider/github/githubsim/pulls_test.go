package githubsim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/pkg/provider/github/githubsim"
	"github.com/hookyard/hookyard/processor"
)

// Pull requests are fetched by repository id and number with the hook's
// token: the state is GitHub's answer, "merged" when merged; a missing pull
// request or one of a repository the token may not see is ErrNotFound,
// never a state; a spent rate limit (403, x-ratelimit-remaining: 0) is a
// failure with the wait until the reset, and five in a row open the
// breaker, after which no call reaches GitHub. Fails if a 404 became a
// state, the rate limit were read as unauthorized, or the breaker removed.
func TestPullRequestsAreFetchedLikeGitHubAnswers(t *testing.T) {
	t.Parallel()
	sim := githubsim.New(githubsim.Config{})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	hook := sim.Hook()
	ep := provider.Endpoint{ID: "gh", Provider: provider.GitHub, SourceAccount: "dev-org", Environment: "test",
		Project: []string{github.PullRequest}, GitHubHook: &hook}
	conn, err := github.Provider{}.Connect([]provider.Endpoint{ep}, provider.APIOptions{BaseURL: srv.URL})
	require.NoError(t, err)
	f := conn.Fetcher()
	require.NotNil(t, f)
	pr := func(repo, n int64) message.Resource {
		return message.Resource{Provider: provider.GitHub, SourceAccount: "dev-org", Environment: "test",
			Type: github.PullRequest, ID: github.PullRequestID(repo, n)}
	}
	ctx := context.Background()

	sim.SetPull(7, "open", false)
	got, err := f.Fetch(ctx, pr(githubsim.DevRepoID, 7))
	require.NoError(t, err)
	require.Equal(t, "open", got.Status)
	sim.SetPull(7, "closed", true)
	got, err = f.Fetch(ctx, pr(githubsim.DevRepoID, 7))
	require.NoError(t, err)
	require.Equal(t, "merged", got.Status)
	require.False(t, got.Deleted)

	for _, r := range []message.Resource{pr(githubsim.DevRepoID, 8), pr(githubsim.DevRepoID+1, 7)} {
		got, err = f.Fetch(ctx, r)
		require.ErrorIs(t, err, provider.ErrNotFound, r.ID)
		require.False(t, got.Deleted)
	}

	sim.SetRateLimited(true)
	before := sim.PullCalls()
	for range 5 {
		_, err = f.Fetch(ctx, pr(githubsim.DevRepoID, 7))
		require.ErrorIs(t, err, github.ErrRateLimited)
		require.NotErrorIs(t, err, provider.ErrNotAttempted)
		var ra interface{ RetryAfter() time.Duration }
		require.True(t, errors.As(err, &ra))
		require.Greater(t, ra.RetryAfter(), 30*time.Minute, "the wait until x-ratelimit-reset")
	}
	for range 5 {
		_, err = f.Fetch(ctx, pr(githubsim.DevRepoID, 7))
		require.True(t, errors.Is(err, provider.ErrNotAttempted), "%v", err)
	}
	require.Equal(t, before+5, sim.PullCalls())
}

// A pull request's events, delivered reversed, twice each and concurrently
// while the pull request moves on GitHub, end at GitHub's final state
// (merged); a pull request GitHub answers 404 for is fetch_not_found and
// never a projection. Fails if pull request events are not hints, or a
// 404 became a state.
func TestPullRequestEventsEndAtGitHubsFinalState(t *testing.T) {
	t.Parallel()
	sim := githubsim.New(githubsim.Config{})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	hook := sim.Hook()
	const secret = "pipeline-github-secret"
	ep := provider.Endpoint{ID: "gh-pulls", Provider: provider.GitHub, SourceAccount: "dev-org", Environment: "test",
		Secrets: []string{secret}, Project: []string{github.PullRequest}, GitHubHook: &hook}
	conn, err := github.Provider{}.Connect([]provider.Endpoint{ep}, provider.APIOptions{BaseURL: srv.URL})
	require.NoError(t, err)
	p := pipelinetest.New(t, pipelinetest.Options{Endpoints: []provider.Endpoint{ep}, Processor: func(c *processor.Config) {
		c.Fetchers[provider.GitHub] = conn.Fetcher()
	}})
	post := func(guids ...string) {
		var wg sync.WaitGroup
		for _, g := range guids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				guid, num, _ := strings.Cut(g, "/")
				body := []byte(fmt.Sprintf(`{"action":"synchronize","number":%s,"pull_request":{"number":%s},"repository":{"id":%d}}`,
					num, num, githubsim.DevRepoID))
				h := http.Header{}
				h.Set(github.SignatureHeader, github.Sign(body, secret))
				h.Set(github.DeliveryHeader, guid)
				h.Set(github.EventHeader, "pull_request")
				code, resp := p.PostSigned(ep.ID, body, h)
				require.Equal(t, http.StatusOK, code, resp)
			}()
		}
		wg.Wait()
	}
	for i, step := range []struct {
		state  string
		merged bool
	}{{"open", false}, {"closed", false}, {"closed", true}} {
		sim.SetPull(7, step.state, step.merged)
		var gs []string
		for j := i; j >= 0; j-- {
			gs = append(gs, fmt.Sprintf("pr7-%d/7", j), fmt.Sprintf("pr7-%d/7", j))
		}
		post(gs...)
	}
	post("pr9-0/9")
	res := func(n int64) message.Resource {
		return message.Resource{Provider: provider.GitHub, SourceAccount: "dev-org", Environment: "test",
			Type: github.PullRequest, ID: github.PullRequestID(githubsim.DevRepoID, n)}
	}
	for j := range 3 {
		p.WaitEvent(fmt.Sprintf("pr7-%d", j), "processed")
	}
	pr, ok := p.Projection(res(7))
	require.True(t, ok)
	require.Equal(t, "merged", pr.Status)
	require.False(t, pr.Deleted)
	p.Eventually(func() bool {
		var n int
		err := p.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM projection_history WHERE event_id = 'pr9-0' AND outcome = 'fetch_not_found'`).Scan(&n)
		return err == nil && n > 0
	}, "the 404 recorded as fetch_not_found")
	_, ok = p.Projection(res(9))
	require.False(t, ok, "a 404 never becomes a state")
}
