package github

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// An endpoint that projects pull requests keys a pull request's events by
// the pull request (repository id and number) and makes them hints; one
// that does not keeps them the repository's, recorded. Fails if the key or
// the project gate is removed.
func TestPullRequestEventsAreHintsOnlyWhereProjected(t *testing.T) {
	t.Parallel()
	body := []byte(`{"action":"synchronize","number":7,"pull_request":{"number":7,"state":"open"},
"repository":{"id":1296269,"full_name":"octocat/Hello-World"}}`)
	for _, c := range []struct {
		project  []string
		typ, id  string
		wantHint bool
	}{
		{nil, "repository", "1296269", false},
		{[]string{PullRequest}, PullRequest, "1296269#7", true},
	} {
		ep := endpoint()
		ep.Project = c.project
		ev, err := Verifier{}.Verify(ep, headers(Sign(body, secret), "pull_request"), body, time.Now())
		require.NoError(t, err)
		require.Equal(t, c.typ, ev.ResourceType)
		require.Equal(t, c.id, ev.ResourceID)
		plan, err := Provider{}.Interpret(provider.StoredEvent{EventType: ev.Type, ResourceType: ev.ResourceType, ResourceID: ev.ResourceID, Payload: body}, ep)
		require.NoError(t, err)
		require.Equal(t, c.wantHint, plan.Fetch)
	}
	// An issue's event stays its repository's even where pull requests are projected.
	ep := endpoint()
	ep.Project = []string{PullRequest}
	ev, err := Verifier{}.Verify(ep, headers(Sign([]byte(issueOpened), secret), "issues"), []byte(issueOpened), time.Now())
	require.NoError(t, err)
	require.Equal(t, "repository", ev.ResourceType)
}

// Pull requests are fetched with a token: an endpoint with none, or an
// App's hook whose key does not parse, is refused at start;
// a project list naming another type is refused by the endpoint check.
func TestPullRequestFetchRefusedWithoutAToken(t *testing.T) {
	t.Setenv(TokenEnv, "")
	ep := *endpoint()
	ep.Project = []string{PullRequest}
	_, err := Provider{}.Connect([]provider.Endpoint{ep}, provider.APIOptions{})
	require.ErrorContains(t, err, "neither is set")
	ep.GitHubHook = &provider.GitHubHook{AppID: "1", PrivateKey: "k"}
	_, err = Provider{}.Connect([]provider.Endpoint{ep}, provider.APIOptions{})
	require.ErrorContains(t, err, "private_key is not PEM", "an App's hook mints installation tokens with its key")
	t.Setenv(TokenEnv, "ghp_x")
	ep.GitHubHook = nil
	conn, err := Provider{}.Connect([]provider.Endpoint{ep}, provider.APIOptions{})
	require.NoError(t, err)
	require.NotNil(t, conn.Fetcher())
	ep.Project = []string{PullRequest, "issue"}
	require.NotEmpty(t, Provider{}.CheckEndpoint(&ep))
	conn, err = Provider{}.Connect([]provider.Endpoint{*endpoint()}, provider.APIOptions{})
	require.NoError(t, err)
	require.Nil(t, conn.Fetcher(), "no endpoint projects pull requests: nothing is fetched")
}
