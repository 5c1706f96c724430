package chargebeesim_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/chargebee/chargebeesim"
)

// The simulated site lists events like Chargebee: Basic auth with the API
// key as user name, offset paging through an opaque next_offset (absent on
// the last page), occurred_at[after] exclusive, oldest first when asked.
// Fails if the client stops before the last page or the simulator accepts
// another key.
func TestSimulatedSiteListsEventsLikeChargebee(t *testing.T) {
	t.Parallel()
	sim := chargebeesim.New(chargebeesim.Config{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	var ids []string
	for _, st := range []string{"active", "non_renewing", "cancelled"} {
		id, code, err := sim.PutSubscription(ctx, "sub_1", st)
		require.NoError(t, err)
		require.Zero(t, code, "no webhook URL: nothing delivered")
		ids = append(ids, id)
	}
	c, err := chargebee.NewClient(chargebee.APIConfig{Site: srv.URL, APIKey: chargebeesim.DevAPIKey, RatePerSecond: 100}, nil)
	require.NoError(t, err)
	var got []string
	offset := ""
	for {
		evs, next, err := c.ListEvents(ctx, time.Now().Add(-time.Minute), offset, 2)
		require.NoError(t, err)
		for _, ev := range evs {
			got = append(got, ev.ID)
		}
		if next == "" {
			break
		}
		offset = next
	}
	require.Equal(t, ids, got, "oldest first, every page")

	evs, _, err := c.ListEvents(ctx, time.Now().Add(time.Minute), "", 10)
	require.NoError(t, err)
	require.Empty(t, evs, "occurred_at[after] in the future")

	bad, err := chargebee.NewClient(chargebee.APIConfig{Site: srv.URL, APIKey: "other", RatePerSecond: 100}, nil)
	require.NoError(t, err)
	_, _, err = bad.ListEvents(ctx, time.Time{}, "", 10)
	require.ErrorIs(t, err, chargebee.ErrUnauthorized)

	resp, err := http.Get(srv.URL + "/api/v2/events?limit=101")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no key at all")
}
