package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/ops/api"
)

// GET /v1/explain/... answers the resource's timeline as JSON, only with the
// bearer token, and 404 for a resource nothing is known about. Fails
// without the route (200 never comes) or if it bypasses the token check.
func TestExplainRouteNeedsTokenAndAnswersTimeline(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	_, err := s.Pool.Exec(ctx, `
INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, resource_type, resource_id,
                           payload, status, outcome, received_at, processed_at)
VALUES ('stripe', 'acct_x', 'live', 'evt_1', 'ep', 'customer.subscription.updated', 'subscription', 'sub_1',
        '{"id":"evt_1","created":1700000000}', 'processed', 'fetched', now() - interval '1 minute', now())`)
	require.NoError(t, err)
	_, err = s.Pool.Exec(ctx, `
INSERT INTO projection (provider, source_account, environment, resource_type, resource_id, state, status, fence_generation, source_event_id)
VALUES ('stripe', 'acct_x', 'live', 'subscription', 'sub_1', '{"id":"sub_1","status":"active"}', 'active', 3, 'evt_1')`)
	require.NoError(t, err)
	_, err = s.Pool.Exec(ctx, `
INSERT INTO projection_history (provider, source_account, environment, resource_type, resource_id, event_id, outcome, status,
                                fence_generation, previous_status, deleted)
VALUES ('stripe', 'acct_x', 'live', 'subscription', 'sub_1', 'evt_1', 'fetched', 'active', 3, '', false)`)
	require.NoError(t, err)

	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: "tok"}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/v1/explain/stripe/acct_x/live/subscription/sub_1"
	for _, tok := range []string{"", "wrong", "to"} {
		code, body := do(t, http.MethodGet, url, tok)
		require.Equal(t, http.StatusUnauthorized, code, "token %q", tok)
		require.NotContains(t, body, "timeline")
	}

	code, body := do(t, http.MethodGet, url, "tok")
	require.Equal(t, http.StatusOK, code, "%v", body)
	require.Equal(t, "stripe/acct_x/live/subscription/sub_1", body["key"])
	require.Equal(t, "active", body["projection"].(map[string]any)["status"])
	require.Equal(t, true, body["access"].(map[string]any)["access"])
	tl := body["timeline"].([]any)
	require.Len(t, tl, 2)
	recv, fetch := tl[0].(map[string]any), tl[1].(map[string]any)
	require.Equal(t, "received", recv["kind"])
	require.Equal(t, "evt_1", recv["event_id"])
	require.Equal(t, "customer.subscription.updated", recv["event_type"])
	require.Equal(t, time.Unix(1700000000, 0).UTC().Format(time.RFC3339), recv["provider_time"])
	require.NotEmpty(t, recv["received_at"])
	require.Equal(t, "fetch", fetch["kind"])
	require.Equal(t, "success", fetch["result"])
	require.Equal(t, "", fetch["previous_status"])

	code, _ = do(t, http.MethodGet, srv.URL+"/v1/explain/stripe/acct_x/live/subscription/sub_unknown", "tok")
	require.Equal(t, http.StatusNotFound, code)
}
