package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/ops/api"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

func do(t *testing.T, method, url, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func TestOpsAPIRequiresBearerToken(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: "secret-token"}))
	t.Cleanup(srv.Close)
	for _, tok := range []string{"", "wrong", "secret-toke"} {
		code, _ := do(t, http.MethodGet, srv.URL+"/v1/access/stripe/a/test/sub_1", tok)
		require.Equal(t, http.StatusUnauthorized, code, "token %q", tok)
		code, _ = do(t, http.MethodPost, srv.URL+"/v1/replay/dead", tok)
		require.Equal(t, http.StatusUnauthorized, code, "token %q", tok)
	}
	code, body := do(t, http.MethodGet, srv.URL+"/v1/access/stripe/a/test/sub_1", "secret-token")
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, false, body["access"])
	require.Equal(t, "unknown_subscription", body["reason"])
	code, _ = do(t, http.MethodGet, srv.URL+"/healthz", "")
	require.Equal(t, http.StatusOK, code)
	code, _ = do(t, http.MethodGet, srv.URL+"/readyz", "")
	require.Equal(t, http.StatusOK, code)
}

// The projection endpoint says why a resource is in its state: the
// projection with its version, generation and the history of outcomes.
func TestProjectionExplainsItsHistory(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	ctx := context.Background()
	_, _, err := p.Sim.Send(ctx, "customer.subscription.created", mustPut(p, "sub_hist", "active"))
	require.NoError(t, err)
	p.WaitIdle()
	_, _, err = p.Sim.Send(ctx, "customer.subscription.deleted", mustPut(p, "sub_hist", "canceled"))
	require.NoError(t, err)
	p.WaitIdle()

	code, body := do(t, http.MethodGet, p.Ops.URL+"/v1/projections/stripe/"+pipelinetest.StripeAccount+"/test/subscription/sub_hist", pipelinetest.OpsToken)
	require.Equal(t, http.StatusOK, code)
	proj := body["projection"].(map[string]any)
	require.Equal(t, "canceled", proj["status"])
	hist := body["history"].([]any)
	require.Len(t, hist, 2)
	require.Equal(t, "fetched", hist[0].(map[string]any)["outcome"])
	require.Equal(t, "canceled", hist[0].(map[string]any)["status"])
	require.Equal(t, "active", hist[1].(map[string]any)["status"])

	code, _ = do(t, http.MethodPost, p.Ops.URL+"/v1/purge?older_than=nonsense", pipelinetest.OpsToken)
	require.Equal(t, http.StatusBadRequest, code)
	code, body = do(t, http.MethodGet, p.Ops.URL+"/v1/events?status=dead", pipelinetest.OpsToken)
	require.Equal(t, http.StatusOK, code)
	require.Empty(t, body["events"])
}

func mustPut(p *pipelinetest.Pipeline, id, status string) any {
	p.Sim.Put(stripesim.Subscription{ID: id, Customer: "cus", Status: status, CurrentPeriodEnd: time.Now().Add(time.Hour).Unix()})
	s, _ := p.Sim.Get(id)
	return s
}

// GET /v1/parked lists parked projections with why they are parked,
// filtered like the dead list. Fails if the route is removed or filters are
// ignored.
func TestParkedEndpointListsParkedProjections(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: "tok"}))
	t.Cleanup(srv.Close)
	_, err := s.Pool.Exec(context.Background(), `
INSERT INTO projection (provider, source_account, environment, resource_type, resource_id, state, status,
                                     fence_generation, needs_reconcile, needs_reconcile_reason, parked_at)
VALUES ('chargebee', 'site', 'test', 'subscription', 'sub_a', '{}', 'active', 1, true, 'version conflict: x', now()),
       ('stripe', 'acct', 'test', 'subscription', 'sub_b', '{}', 'active', 1, true, 'unordered: y', now()),
       ('stripe', 'acct', 'test', 'subscription', 'sub_c', '{}', 'active', 1, false, NULL, NULL)`)
	require.NoError(t, err)

	code, body := do(t, http.MethodGet, srv.URL+"/v1/parked", "tok")
	require.Equal(t, http.StatusOK, code)
	require.EqualValues(t, 2, body["count"])
	code, body = do(t, http.MethodGet, srv.URL+"/v1/parked?provider=stripe&account=acct&environment=test", "tok")
	require.Equal(t, http.StatusOK, code)
	require.EqualValues(t, 1, body["count"])
	first := body["parked"].([]any)[0].(map[string]any)
	require.Equal(t, "unordered: y", first["needs_reconcile_reason"])
	code, _ = do(t, http.MethodGet, srv.URL+"/v1/parked?limit=-1", "tok")
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = do(t, http.MethodGet, srv.URL+"/v1/parked", "")
	require.Equal(t, http.StatusUnauthorized, code)
}
