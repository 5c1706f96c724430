package githubsim_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/pkg/provider/github/githubsim"
)

// A repository hook's deliveries carry the repository, and a rename keeps
// its id while full_name changes, as on GitHub. The deliveries before and
// after a rename are verified as the receiver verifies them and have one
// resource key. Fails if the simulator's deliveries carry no repository id,
// or if the adapter keys by full_name.
func TestRenamedRepositoryDeliveriesHaveOneResourceKey(t *testing.T) {
	t.Parallel()
	ep := &provider.Endpoint{ID: "gh", Provider: provider.GitHub, SourceAccount: "o", Environment: "prod", Secrets: []string{"s"}}
	var mu sync.Mutex
	var got []provider.Event
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev, err := github.Verifier{}.Verify(ep, r.Header, body, time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}))
	t.Cleanup(rcv.Close)
	sim := githubsim.New(githubsim.Config{WebhookURL: rcv.URL, Secret: "s", Repo: "octo/widgets"})

	_, status, err := sim.Send(t.Context(), "issues", map[string]any{"action": "opened", "issue": map[string]any{"number": 1}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	sim.RenameRepo("octo-org/gadgets")
	_, status, err = sim.Send(t.Context(), "issues", map[string]any{"action": "closed", "issue": map[string]any{"number": 1}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 2)
	require.Contains(t, string(got[0].Payload), `"full_name":"octo/widgets"`)
	require.Contains(t, string(got[1].Payload), `"full_name":"octo-org/gadgets"`)
	require.Equal(t, "repository", got[0].ResourceType)
	require.NotEmpty(t, got[0].ResourceID)
	require.Equal(t, got[0].ResourceType+"/"+got[0].ResourceID, got[1].ResourceType+"/"+got[1].ResourceID,
		"one repository, one resource key, across a rename")
}

// GitHub's default content type for a new webhook is a form, the JSON in
// its payload field; the simulator sends that unless told JSON, and the
// adapter reads it.
func TestSimulatedHookSendsGitHubsDefaultFormContentType(t *testing.T) {
	t.Parallel()
	ep := &provider.Endpoint{ID: "gh", Provider: provider.GitHub, SourceAccount: "o", Environment: "prod", Secrets: []string{"s"}}
	types := make(chan string, 2)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		types <- r.Header.Get("Content-Type")
		body, _ := io.ReadAll(r.Body)
		if _, err := (github.Verifier{}).Verify(ep, r.Header, body, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}))
	t.Cleanup(rcv.Close)
	for _, ct := range []string{"", githubsim.ContentTypeJSON} {
		sim := githubsim.New(githubsim.Config{WebhookURL: rcv.URL, Secret: "s", ContentType: ct})
		_, status, err := sim.Send(t.Context(), "push", map[string]any{"ref": "refs/heads/main"})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
	}
	require.Equal(t, "application/x-www-form-urlencoded", <-types)
	require.Equal(t, "application/json", <-types)
}
