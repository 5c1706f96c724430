package github

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// The operator's manual tells what a replayed GitHub body does: GitHub
// events are recorded, never projected nor fetched (but the pull requests
// an endpoint projects, read again from GitHub), so a replay adds a stored
// event and changes no state. The manual must say so, not promise a fetch
// that never happens.
func TestManualSaysReplayedGitHubBodiesAreStoredNotProjected(t *testing.T) {
	t.Parallel()
	p, err := Provider{}.Interpret(provider.StoredEvent{EventType: "push", ResourceType: "repository", ResourceID: "1",
		Payload: []byte(`{"repository":{"id":1}}`)}, nil)
	require.NoError(t, err)
	require.Equal(t, provider.Plan{}, p, "GitHub events ask for nothing but being recorded")

	manual, err := os.ReadFile("../../../docs/operations.md")
	require.NoError(t, err)
	security, _, _ := strings.Cut(string(manual)[strings.Index(string(manual), "## Security"):], "\n## Access rules")
	security = strings.Join(strings.Fields(security), " ") // the manual's line breaks fall anywhere
	require.NotContains(t, security, "triggers a fetch")
	require.Contains(t, security, "GitHub events are stored, not projected")
}
