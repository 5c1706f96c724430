package githubsim_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// appFetcher connects the fetcher of an App hook endpoint projecting
// project, against sim; log receives the client's logs.
func appFetcher(t *testing.T, sim *githubsim.Sim, url string, log *slog.Logger, project ...string) provider.Fetcher {
	t.Helper()
	hook := sim.Hook()
	ep := provider.Endpoint{ID: "gh-app", Provider: provider.GitHub, SourceAccount: "dev-org", Environment: "test",
		Project: project, GitHubHook: &hook}
	require.Empty(t, github.Provider{}.CheckEndpoint(&ep))
	conn, err := github.Provider{}.Connect([]provider.Endpoint{ep}, provider.APIOptions{BaseURL: url, Log: log})
	require.NoError(t, err)
	require.NotNil(t, conn.Fetcher())
	return conn.Fetcher()
}

func appSim(t *testing.T, cfg githubsim.Config) (*githubsim.Sim, string) {
	t.Helper()
	cfg.AppID = "12345"
	sim := githubsim.New(cfg)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return sim, srv.URL
}

func pullOf(n int64) message.Resource {
	return message.Resource{Provider: provider.GitHub, SourceAccount: "dev-org", Environment: "test",
		Type: github.PullRequest, ID: github.PullRequestID(githubsim.DevRepoID, n)}
}

// An App's hook reads pull requests with an installation token: the
// simulator refuses the App's JWT and any other token there, so a read
// succeeds only with a token minted for the repository's installation.
// Once the App is uninstalled, the token stops working and minting
// another is refused: a clear ErrInstallationToken, whose text holds no
// token, and neither do the client's logs. Fails if App hooks were
// refused at start, fetched with the JWT, or a refused mint were hidden.
func TestAppHookPullRequestsAreFetchedWithAnInstallationToken(t *testing.T) {
	t.Parallel()
	sim, url := appSim(t, githubsim.Config{})
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logs, &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := appFetcher(t, sim, url, log, github.PullRequest)
	ctx := context.Background()

	sim.SetPull(7, "open", false)
	got, err := f.Fetch(ctx, pullOf(7))
	require.NoError(t, err)
	require.Equal(t, "open", got.Status)
	require.Equal(t, 1, sim.InstallationTokenMints())
	_, err = f.Fetch(ctx, pullOf(8))
	require.ErrorIs(t, err, provider.ErrNotFound, "a missing pull request is not found, never a state")
	sim.SetPull(7, "closed", true)
	got, err = f.Fetch(ctx, pullOf(7))
	require.NoError(t, err)
	require.Equal(t, "merged", got.Status)
	require.Equal(t, 1, sim.InstallationTokenMints(), "the token is reused while valid")

	sim.DeleteInstallation(githubsim.DevInstallationID)
	_, err = f.Fetch(ctx, pullOf(7))
	require.ErrorIs(t, err, github.ErrInstallationToken)
	require.ErrorIs(t, err, github.ErrNotFound)
	require.ErrorContains(t, err, "installation removed or suspended")
	require.NotContains(t, err.Error(), "ghs_")
	_, err = f.Fetch(ctx, pullOf(7))
	require.ErrorIs(t, err, provider.ErrNotFound, "the App is on the repository no more")
	logMu.Lock()
	defer logMu.Unlock()
	require.Contains(t, logs.String(), "installation token minted")
	require.NotContains(t, logs.String(), "ghs_", "a token is never logged")
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// Many workers asking for one installation's token at once get one token,
// minted once, after one lookup of the repository's installation. Fails if
// minting or the lookup were not single-flight (each worker would make its
// own call, spending the App's quota).
func TestInstallationTokenIsMintedOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	sim, url := appSim(t, githubsim.Config{})
	f := appFetcher(t, sim, url, nil, github.PullRequest)
	const workers = 16
	for n := range int64(workers) {
		sim.SetPull(n+1, "open", false)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, workers)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = f.Fetch(context.Background(), pullOf(int64(i+1)))
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 1, sim.InstallationTokenMints())
	require.Equal(t, 2, sim.AppCalls(), "one lookup of the repository's installation, one mint")
	require.Equal(t, workers, sim.PullCalls())
}

// A token is replaced before it expires (InstallationTokenRenewBefore
// ahead of expires_at), and one GitHub stops accepting earlier (401) is
// replaced and the read sent again, once. Fails if expires_at were
// trusted to the last second or a 401 ended the fetch.
func TestExpiredInstallationTokenIsRenewed(t *testing.T) {
	t.Parallel()
	t.Run("refused before expires_at", func(t *testing.T) {
		t.Parallel()
		sim, url := appSim(t, githubsim.Config{})
		f := appFetcher(t, sim, url, nil, github.PullRequest)
		sim.SetPull(7, "open", false)
		_, err := f.Fetch(context.Background(), pullOf(7))
		require.NoError(t, err)
		require.Equal(t, 1, sim.InstallationTokenMints())
		sim.ExpireInstallationTokens()
		got, err := f.Fetch(context.Background(), pullOf(7))
		require.NoError(t, err)
		require.Equal(t, "open", got.Status)
		require.Equal(t, 2, sim.InstallationTokenMints())
		require.Equal(t, 3, sim.PullCalls(), "the refused read was sent again")
	})
	t.Run("renewed ahead of expires_at", func(t *testing.T) {
		t.Parallel()
		// Tokens that live less than the renewal margin are never used
		// past it: each read mints a new one.
		sim, url := appSim(t, githubsim.Config{InstallationTokenTTL: github.InstallationTokenRenewBefore - time.Minute})
		f := appFetcher(t, sim, url, nil, github.PullRequest)
		sim.SetPull(7, "open", false)
		for i := range 3 {
			_, err := f.Fetch(context.Background(), pullOf(7))
			require.NoError(t, err)
			require.Equal(t, i+1, sim.InstallationTokenMints())
		}
		require.Equal(t, 3, sim.PullCalls(), "no read met a 401")
	})
}

// Installations are read with the App's JWT: active, suspended (GitHub
// keeps it, 200 with suspended_at), and, once removed, a 404 that GitHub
// confirms is the App's own (GET /app) becomes a tombstone. A JWT GitHub
// refuses is an error, never a deletion. A token hook cannot project
// installations. Fails if suspended read as active, a removal never left
// a tombstone, or a refused JWT became one.
func TestInstallationsAreFetchedLikeGitHubAnswers(t *testing.T) {
	t.Parallel()
	sim, url := appSim(t, githubsim.Config{})
	f := appFetcher(t, sim, url, nil, github.Installation)
	inst := func(id int64) message.Resource {
		return message.Resource{Provider: provider.GitHub, SourceAccount: "dev-org", Environment: "test",
			Type: github.Installation, ID: strconv.FormatInt(id, 10)}
	}
	ctx := context.Background()
	got, err := f.Fetch(ctx, inst(githubsim.DevInstallationID))
	require.NoError(t, err)
	require.Equal(t, "active", got.Status)
	sim.SuspendInstallation(githubsim.DevInstallationID, true)
	got, err = f.Fetch(ctx, inst(githubsim.DevInstallationID))
	require.NoError(t, err)
	require.Equal(t, "suspended", got.Status)
	require.False(t, got.Deleted)
	sim.DeleteInstallation(githubsim.DevInstallationID)
	got, err = f.Fetch(ctx, inst(githubsim.DevInstallationID))
	require.NoError(t, err)
	require.True(t, got.Deleted)

	// Another App's key: GitHub refuses the JWT (401), which says nothing
	// of the installation.
	other := githubsim.New(githubsim.Config{AppID: "12345"})
	hook := other.Hook()
	ep := provider.Endpoint{ID: "gh-app", Provider: provider.GitHub, SourceAccount: "dev-org", Environment: "test",
		Project: []string{github.Installation}, GitHubHook: &hook}
	conn, err := github.Provider{}.Connect([]provider.Endpoint{ep}, provider.APIOptions{BaseURL: url})
	require.NoError(t, err)
	got, err = conn.Fetcher().Fetch(ctx, inst(githubsim.DevInstallationID))
	require.ErrorIs(t, err, github.ErrUnauthorized)
	require.NotErrorIs(t, err, provider.ErrNotFound)
	require.False(t, got.Deleted)

	tokenHook := githubsim.New(githubsim.Config{}).Hook()
	ep.GitHubHook = &tokenHook
	require.NotEmpty(t, github.Provider{}.CheckEndpoint(&ep), "installations need an App")
	_, err = github.Provider{}.Connect([]provider.Endpoint{ep}, provider.APIOptions{BaseURL: url})
	require.ErrorContains(t, err, "App's JWT")
}

// An installation's events, delivered reversed, twice each and
// concurrently while the installation moves on GitHub (created,
// suspended, unsuspended, removed), end at GitHub's final state: a
// tombstone for the removed installation, "suspended" for one still
// suspended. Fails if installation events were not hints, a late
// "created" re-opened a removed installation, or a removal left it active.
func TestInstallationEventsEndAtGitHubsFinalState(t *testing.T) {
	t.Parallel()
	sim, url := appSim(t, githubsim.Config{})
	const other = 4242
	sim.AddInstallation(other)
	hook := sim.Hook()
	const secret = "pipeline-github-app-secret"
	ep := provider.Endpoint{ID: "gh-app", Provider: provider.GitHub, SourceAccount: "dev-org", Environment: "test",
		Secrets: []string{secret}, Project: []string{github.Installation}, GitHubHook: &hook}
	require.Empty(t, github.Provider{}.CheckEndpoint(&ep))
	conn, err := github.Provider{}.Connect([]provider.Endpoint{ep}, provider.APIOptions{BaseURL: url})
	require.NoError(t, err)
	p := pipelinetest.New(t, pipelinetest.Options{Endpoints: []provider.Endpoint{ep}, Processor: func(c *processor.Config) {
		c.Fetchers[provider.GitHub] = conn.Fetcher()
	}})
	type ev struct {
		guid, action string
		id           int64
	}
	post := func(evs ...ev) {
		var wg sync.WaitGroup
		for _, e := range evs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := []byte(fmt.Sprintf(`{"action":%q,"installation":{"id":%d,"account":{"login":"dev-org"}},"sender":{"login":"octocat"}}`,
					e.action, e.id))
				h := http.Header{}
				h.Set(github.SignatureHeader, github.Sign(body, secret))
				h.Set(github.DeliveryHeader, e.guid)
				h.Set(github.EventHeader, "installation")
				code, resp := p.PostSigned(ep.ID, body, h)
				require.Equal(t, http.StatusOK, code, resp)
			}()
		}
		wg.Wait()
	}
	steps := []struct {
		action string
		move   func()
	}{
		{"created", func() {}},
		{"suspend", func() {
			sim.SuspendInstallation(githubsim.DevInstallationID, true)
			sim.SuspendInstallation(other, true)
		}},
		{"unsuspend", func() { sim.SuspendInstallation(githubsim.DevInstallationID, false) }},
		{"deleted", func() { sim.DeleteInstallation(githubsim.DevInstallationID) }},
	}
	var guids []string
	for i, step := range steps {
		step.move()
		var evs []ev
		for j := i; j >= 0; j-- {
			for _, id := range []int64{githubsim.DevInstallationID, other} {
				g := fmt.Sprintf("inst%d-%d", id, j)
				evs = append(evs, ev{g, steps[j].action, id}, ev{g, steps[j].action, id})
				if j == i {
					guids = append(guids, g)
				}
			}
		}
		post(evs...)
	}
	// First deliveries that arrive late, after the removal, newest first:
	// a "created" last of all.
	var late []ev
	for j := len(steps) - 1; j >= 0; j-- {
		for _, id := range []int64{githubsim.DevInstallationID, other} {
			g := fmt.Sprintf("late%d-%d", id, j)
			late = append(late, ev{g, steps[j].action, id}, ev{g, steps[j].action, id})
			guids = append(guids, g)
		}
	}
	for i := 0; i < len(late); i += 4 {
		post(late[i : i+4]...)
	}
	for _, g := range guids {
		p.WaitEvent(g, "processed")
	}
	res := func(id int64) message.Resource {
		return message.Resource{Provider: provider.GitHub, SourceAccount: "dev-org", Environment: "test",
			Type: github.Installation, ID: strconv.FormatInt(id, 10)}
	}
	removed, ok := p.Projection(res(githubsim.DevInstallationID))
	require.True(t, ok)
	require.True(t, removed.Deleted, "removed at GitHub: a tombstone")
	suspended, ok := p.Projection(res(other))
	require.True(t, ok)
	require.Equal(t, "suspended", suspended.Status)
	require.False(t, suspended.Deleted)
	require.Greater(t, sim.InstallationCalls(), 0)
}

// The App's calls (its JWT) and each installation's (its token) have their
// own limiter and breaker, as GitHub counts them apart: an installation
// whose rate limit is spent (429 with x-ratelimit-remaining: 0) opens its
// own breaker after five refusals, each waiting until x-ratelimit-reset,
// while the App still reads installations; the App's spent limit then
// opens the App's breaker. Fails if the credentials shared one guard, or
// a spent limit were not a failure with its wait.
func TestAppAndInstallationCallsHaveTheirOwnLimiterAndBreaker(t *testing.T) {
	t.Parallel()
	sim, url := appSim(t, githubsim.Config{})
	f := appFetcher(t, sim, url, nil, github.PullRequest, github.Installation)
	inst := message.Resource{Provider: provider.GitHub, SourceAccount: "dev-org", Environment: "test",
		Type: github.Installation, ID: strconv.FormatInt(githubsim.DevInstallationID, 10)}
	ctx := context.Background()
	sim.SetPull(7, "open", false)
	_, err := f.Fetch(ctx, pullOf(7))
	require.NoError(t, err)

	sim.SetRateLimitStatus(http.StatusTooManyRequests)
	sim.SetInstallationRateLimited(githubsim.DevInstallationID, true)
	for range 5 {
		_, err = f.Fetch(ctx, pullOf(7))
		require.ErrorIs(t, err, github.ErrRateLimited)
		require.NotErrorIs(t, err, provider.ErrNotAttempted)
		var ra interface{ RetryAfter() time.Duration }
		require.True(t, errors.As(err, &ra))
		require.Greater(t, ra.RetryAfter(), 30*time.Minute, "the wait until x-ratelimit-reset")
	}
	calls := sim.PullCalls()
	_, err = f.Fetch(ctx, pullOf(7))
	require.ErrorIs(t, err, provider.ErrNotAttempted, "the installation's breaker is open")
	require.Equal(t, calls, sim.PullCalls())
	got, err := f.Fetch(ctx, inst)
	require.NoError(t, err, "the App's own calls are counted apart")
	require.Equal(t, "active", got.Status)

	sim.SetRateLimited(true)
	for range 5 {
		_, err = f.Fetch(ctx, inst)
		require.ErrorIs(t, err, github.ErrRateLimited)
	}
	calls = sim.AppCalls()
	_, err = f.Fetch(ctx, inst)
	require.ErrorIs(t, err, provider.ErrNotAttempted, "the App's breaker is open")
	require.Equal(t, calls, sim.AppCalls())
}
