package githubsim_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/pkg/provider/github/githubsim"
)

// The simulated hook behaves like GitHub's where integrations trip: it
// never redelivers by itself, deliveries page by cursor through the Link
// header, newest first, a redelivery is accepted with 202 and then sent
// under the original guid with a new id, and a wrong token is a 401.
// Fails if the client or the simulator page by number, or a redelivery
// gets a new guid.
func TestSimulatedHookListsAndRedeliversLikeGitHub(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get(github.DeliveryHeader))
		n := len(got)
		mu.Unlock()
		if n == 2 {
			w.WriteHeader(http.StatusServiceUnavailable) // the second delivery fails
		}
	}))
	t.Cleanup(rcv.Close)
	sim := githubsim.New(githubsim.Config{WebhookURL: rcv.URL, Secret: "s", Repo: "o/r", HookID: 5, Token: "tok"})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	var guids []string
	for range 3 {
		g, _, err := sim.Send(ctx, "push", map[string]any{"ref": "x"})
		require.NoError(t, err)
		guids = append(guids, g)
	}
	c, err := github.NewClient(github.APIConfig{BaseURL: srv.URL, RatePerSecond: 100, Burst: 10}, sim.Hook(), nil)
	require.NoError(t, err)
	var ds []github.Delivery
	cursor := ""
	for {
		page, next, err := c.ListDeliveries(ctx, cursor, 1)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 1)
		ds = append(ds, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, ds, 3)
	require.Equal(t, []string{guids[2], guids[1], guids[0]}, []string{ds[0].GUID, ds[1].GUID, ds[2].GUID}, "newest first")
	require.Equal(t, http.StatusServiceUnavailable, ds[1].StatusCode)
	require.Zero(t, sim.Redeliveries(guids[1]), "GitHub never redelivers by itself")

	require.NoError(t, c.Redeliver(ctx, ds[1].ID))
	sim.Wait()
	page, _, err := c.ListDeliveries(ctx, "", 1)
	require.NoError(t, err)
	require.Equal(t, guids[1], page[0].GUID, "a redelivery keeps the guid")
	require.True(t, page[0].Redelivery)
	require.NotEqual(t, ds[1].ID, page[0].ID)
	require.Equal(t, http.StatusOK, page[0].StatusCode)

	bad, err := github.NewClient(github.APIConfig{BaseURL: srv.URL, RatePerSecond: 100}, github.Hook{Repo: "o/r", HookID: 5, Token: "wrong"}, nil)
	require.NoError(t, err)
	_, _, err = bad.ListDeliveries(ctx, "", 10)
	require.ErrorIs(t, err, github.ErrUnauthorized)
}
