package githubsim_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/pkg/provider/github/githubsim"
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
