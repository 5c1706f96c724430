package cli_test

import (
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider/github/githubsim"
)

// `hookyard reconcile` runs one round now over the sources its flags select
// and prints per source what it did, and the checkpoints. Here a GitHub
// delivery that never got through is asked for again, once, and a filter on
// another provider leaves the GitHub source alone. Fails if the command is
// missing, ignores its filters, or prints no report.
func TestReconcileCommandRunsOneFilteredRoundAndPrintsIt(t *testing.T) {
	e := newCLIEnv(t, nil)
	sim := githubsim.New(githubsim.Config{Secret: "s", Repo: "org/repo", HookID: 9, Token: "ghp_cli_test"})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	guid, status, err := sim.Send(t.Context(), "push", map[string]any{"repository": map[string]any{"full_name": "org/repo"}})
	require.NoError(t, err)
	require.Zero(t, status, "no receiver: the delivery failed")
	t.Setenv("GITHUB_API_BASE", srv.URL)
	t.Setenv("GITHUB_TOKEN", "ghp_cli_test")
	require.NoError(t, os.WriteFile(e.config, []byte(`
endpoints:
  - id: gh
    provider: github
    source_account: org
    environment: prod
    secrets: [s]
    github_hook: {repo: org/repo, hook_id: 9, token: "${GITHUB_TOKEN}"}
`), 0o600))

	type report struct {
		Round struct {
			Sources []struct {
				Source       string `json:"source"`
				Redeliveries int    `json:"redeliveries_asked"`
				Listings     []struct {
					Listing  string `json:"listing"`
					Complete bool   `json:"complete"`
				} `json:"listings"`
			} `json:"sources"`
		} `json:"round"`
		Checkpoints []struct {
			Source  string `json:"source"`
			Listing string `json:"listing"`
		} `json:"checkpoints"`
	}
	var other report
	e.runJSON(&other, "reconcile", "-provider", "stripe")
	require.Empty(t, other.Round.Sources)

	var got report
	e.runJSON(&got, "reconcile", "-provider", "github", "-account", "org")
	require.Len(t, got.Round.Sources, 1)
	require.Equal(t, "github/org/prod", got.Round.Sources[0].Source)
	require.Equal(t, 1, got.Round.Sources[0].Redeliveries)
	require.Equal(t, "deliveries", got.Round.Sources[0].Listings[0].Listing)
	require.True(t, got.Round.Sources[0].Listings[0].Complete)
	require.Len(t, got.Checkpoints, 1)
	sim.Wait()
	require.Equal(t, 1, sim.Redeliveries(guid))
}
