package stripesim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

// GET /v1/events lists like Stripe's: only the last 30 days, newest first,
// created[gte] and types[] filters, starting_after paging, at most 20
// types, type and types not together. Fails if the simulator lists events
// older than 30 days or in another order (a reconciler tested against it
// would then rely on what Stripe never does).
func TestEventsListLikeStripe(t *testing.T) {
	t.Parallel()
	sim := stripesim.New(stripesim.Config{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	now := time.Now()
	sim.EmitAt("invoice.paid", map[string]any{"id": "in_ancient", "object": "invoice"}, now.Add(-31*24*time.Hour))
	oldID, _ := sim.EmitAt("invoice.paid", map[string]any{"id": "in_old", "object": "invoice"}, now.Add(-2*time.Hour))
	midID, _ := sim.EmitAt("customer.subscription.updated", map[string]any{"id": "sub_1", "object": "subscription"}, now.Add(-time.Hour))
	newID, _ := sim.Emit("invoice.paid", map[string]any{"id": "in_new", "object": "invoice"})

	list := func(q url.Values) (int, []string, bool) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/events?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+stripesim.DevAPIKey)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var page struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			HasMore bool `json:"has_more"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&page)
		var ids []string
		for _, d := range page.Data {
			ids = append(ids, d.ID)
		}
		return resp.StatusCode, ids, page.HasMore
	}
	code, ids, more := list(url.Values{})
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{newID, midID, oldID}, ids, "newest first, nothing older than 30 days")
	require.False(t, more)

	_, ids, more = list(url.Values{"limit": {"1"}})
	require.Equal(t, []string{newID}, ids)
	require.True(t, more)
	_, ids, _ = list(url.Values{"limit": {"1"}, "starting_after": {newID}})
	require.Equal(t, []string{midID}, ids)

	_, ids, _ = list(url.Values{"created[gte]": {strconv.FormatInt(now.Add(-90*time.Minute).Unix(), 10)}})
	require.Equal(t, []string{newID, midID}, ids)
	_, ids, _ = list(url.Values{"types[]": {"invoice.paid"}})
	require.Equal(t, []string{newID, oldID}, ids)
	_, ids, _ = list(url.Values{"type": {"customer.subscription.*"}})
	require.Equal(t, []string{midID}, ids)

	code, _, _ = list(url.Values{"types[]": strings.Split(strings.Repeat("a,", 21)[:41], ",")})
	require.Equal(t, http.StatusBadRequest, code, "at most 20 types")
	code, _, _ = list(url.Values{"type": {"invoice.paid"}, "types[]": {"invoice.paid"}})
	require.Equal(t, http.StatusBadRequest, code)
	code, _, _ = list(url.Values{"limit": {"101"}})
	require.Equal(t, http.StatusBadRequest, code)
}
