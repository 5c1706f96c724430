package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/ops/api"
	"github.com/hookyard/hookyard/pkg/ops/audit"
)

// One token per scope, and the all-scope OPS_TOKEN (token).
var scoped = []api.Token{
	{Name: "app", Secret: "tok-access", Scopes: []api.Scope{api.ScopeAccess}},
	{Name: "viewer", Secret: "tok-read", Scopes: []api.Scope{api.ScopeRead}},
	{Name: "dpo", Secret: "tok-payload", Scopes: []api.Scope{api.ScopePayload}},
	{Name: "oncall", Secret: "tok-operate", Scopes: []api.Scope{api.ScopeOperate}},
	{Name: "support", Secret: "tok-read-payload", Scopes: []api.Scope{api.ScopeRead, api.ScopePayload}},
}

func scopedServer(t *testing.T) (*httptest.Server, *dbtest.Schema) {
	t.Helper()
	s := dbtest.New(t)
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: token, Tokens: scoped}))
	t.Cleanup(srv.Close)
	return srv, s
}

// The API's scopes are the ones the config accepts.
func TestConfigKnowsTheAPIsScopes(t *testing.T) {
	t.Parallel()
	var names []string
	for _, s := range api.Scopes {
		names = append(names, string(s))
	}
	require.Equal(t, config.OpsScopes, names)
}

// routeScopes is the scope every /v1 route requires. A route added to the
// API without a row here fails the test below, so none goes out unscoped.
var routeScopes = map[string]api.Scope{
	"GET /v1/access/:provider/:account/:environment/:id":            api.ScopeAccess,
	"GET /v1/projections/:provider/:account/:environment/:type/:id": api.ScopeRead,
	"GET /v1/explain/:provider/:account/:environment/:type/:id":     api.ScopeRead,
	"GET /v1/events/:provider/:account/:environment/:event_id":      api.ScopeRead,
	"GET /v1/events":   api.ScopeRead,
	"GET /v1/jobs":     api.ScopeRead,
	"GET /v1/jobs/:id": api.ScopeRead,
	"GET /v1/dead":     api.ScopeRead,
	"GET /v1/parked":   api.ScopeRead,
	"GET /v1/dead/:provider/:account/:environment/:event_id": api.ScopeRead,
	"GET /v1/actions": api.ScopeRead,
	"GET /v1/actions/:provider/:account/:environment/:subject/:kind": api.ScopeRead,
	"GET /v1/audit": api.ScopeRead,
	"POST /v1/replay/event/:provider/:account/:environment/:event_id": api.ScopeOperate,
	"POST /v1/replay/dead": api.ScopeOperate,
	"POST /v1/replay/resource/:provider/:account/:environment/:type/:id": api.ScopeOperate,
	"POST /v1/purge":            api.ScopeOperate,
	"POST /v1/jobs/:id/cancel":  api.ScopeOperate,
	"POST /v1/replay/partition": api.ScopeOperate,
	"POST /v1/dead/replay":      api.ScopeOperate,
	"POST /v1/actions/replay":   api.ScopeOperate,
	"POST /v1/actions/skip":     api.ScopeOperate,
	"POST /v1/erase":            api.ScopeOperate,
}

// Every /v1 route enforces its scope: no token or an unknown one is a 401,
// a valid token without the route's scope a 403 missing_scope, and a token
// with it (or OPS_TOKEN, which has every scope) gets past the gate.
func TestEveryRouteRequiresItsScope(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	e := api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: token, Tokens: scoped})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	var seen []string
	for _, r := range e.Routes() {
		if !strings.HasPrefix(r.Path, "/v1/") {
			continue
		}
		route := r.Method + " " + r.Path
		seen = append(seen, route)
		need, ok := routeScopes[route]
		require.True(t, ok, "route %s has no scope in this test", route)
		url := srv.URL + strings.NewReplacer(":provider", "stripe", ":account", "acct_a", ":environment", "test",
			":type", "subscription", ":id", "1", ":event_id", "evt_1", ":subject", "in_1", ":kind", "receipt").Replace(r.Path)
		for _, tok := range []string{"", "tok-unknown", "tok-acces", token + "x"} {
			require.Equal(t, http.StatusUnauthorized, send(t, r.Method, url, tok, nil, nil), "%s with %q", route, tok)
		}
		for _, tk := range scoped {
			var body struct {
				Error struct{ Code, Message string }
			}
			code := send(t, r.Method, url, tk.Secret, nil, &body)
			if slices.Contains(tk.Scopes, need) {
				require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, code, "%s with %s", route, tk.Name)
				continue
			}
			require.Equal(t, http.StatusForbidden, code, "%s with %s", route, tk.Name)
			require.Equal(t, "missing_scope", body.Error.Code, route)
			require.Contains(t, body.Error.Message, string(need), route)
		}
		code := send(t, r.Method, url, token, nil, nil)
		require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, code, "%s with OPS_TOKEN", route)
	}
	require.Len(t, seen, len(routeScopes), "routes in the table that the API no longer has")
}

// Two tokens of one scope work at once, so a token is rotated by adding
// the new one, moving the application, then removing the old one.
func TestTwoTokensOfOneScopeWorkAtOnce(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Tokens: []api.Token{
		{Name: "app", Secret: "tok-old", Scopes: []api.Scope{api.ScopeAccess}},
		{Name: "app-next", Secret: "tok-new", Scopes: []api.Scope{api.ScopeAccess}},
	}}))
	t.Cleanup(srv.Close)
	for _, tok := range []string{"tok-old", "tok-new"} {
		require.Equal(t, http.StatusNotFound, send(t, http.MethodGet, srv.URL+"/v1/access/stripe/a/test/sub_1", tok, nil, nil))
	}
	// No OPS_TOKEN configured: an empty bearer token is not a match.
	require.Equal(t, http.StatusUnauthorized, send(t, http.MethodGet, srv.URL+"/v1/access/stripe/a/test/sub_1", "", nil, nil))
}

// Authenticate is what other ops pages (the console) check a request
// with: the principal's name and scopes, or ErrUnauthenticated.
func TestAuthenticateNamesThePrincipalAndItsScopes(t *testing.T) {
	t.Parallel()
	auth := api.NewAuthenticator(token, scoped)
	req := httptest.NewRequest(http.MethodGet, "/console/", nil)
	_, err := auth.Authenticate(req)
	require.ErrorIs(t, err, api.ErrUnauthenticated)
	req.Header.Set("Authorization", "Bearer tok-read-payload")
	p, err := auth.Authenticate(req)
	require.NoError(t, err)
	require.Equal(t, "support", p.Name)
	require.True(t, p.Has(api.ScopeRead))
	require.True(t, p.Has(api.ScopePayload))
	require.False(t, p.Has(api.ScopeOperate))
	req.Header.Set("Authorization", "Bearer "+token)
	p, err = auth.Authenticate(req)
	require.NoError(t, err)
	require.Equal(t, config.OpsTokenName, p.Name)
	for _, s := range api.Scopes {
		require.True(t, p.Has(s), s)
	}
}

// A payload is read only with the payload scope (on top of read), and
// every payload read is recorded with the token's name and the event; a
// read without the payload is not.
func TestPayloadReadNeedsThePayloadScopeAndIsAudited(t *testing.T) {
	t.Parallel()
	srv, s := scopedServer(t)
	seedDeadEvents(t, s.Pool)
	for _, path := range []string{"/v1/events/stripe/acct_a/test/evt_2", "/v1/dead/stripe/acct_a/test/evt_2"} {
		var body struct {
			Error struct{ Code string }
		}
		require.Equal(t, http.StatusForbidden, send(t, http.MethodGet, srv.URL+path+"?payload=true", "tok-read", nil, &body), path)
		require.Equal(t, "missing_scope", body.Error.Code)
		require.Equal(t, http.StatusForbidden, send(t, http.MethodGet, srv.URL+path+"?payload=true", "tok-payload", nil, nil), path)
		require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+path, "tok-read", nil, nil), path)

		var got map[string]any
		require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+path+"?payload=true", "tok-read-payload", nil, &got), path)
		require.Contains(t, string(mustJSON(t, got)), `"payload":{"id":"evt_2"}`, path)
	}
	entries, err := audit.List(t.Context(), s.Pool, timeZero, 10)
	require.NoError(t, err)
	require.Len(t, entries, 2, "one record per payload read, none for reads without one")
	for _, e := range entries {
		require.Equal(t, "support", e.Actor)
		require.Equal(t, audit.ActionPayloadRead, e.Action)
		require.EqualValues(t, 1, e.Rows)
		require.JSONEq(t, `{"provider":"stripe","account":"acct_a","environment":"test","event_id":"evt_2"}`, string(e.Target))
	}
	// A payload read of an event that is not there reads nothing.
	require.Equal(t, http.StatusNotFound, send(t, http.MethodGet, srv.URL+"/v1/events/stripe/acct_a/test/evt_none?payload=true", "tok-read-payload", nil, nil))
	entries, err = audit.List(t.Context(), s.Pool, timeZero, 10)
	require.NoError(t, err)
	require.Len(t, entries, 2)
}

var timeZero time.Time

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// A payload leaves only with its record: when the audit cannot be written
// the read answers 503 audit_failed and carries no payload; a change that
// could not be recorded says so (503 audit_failed) instead of 2xx.
func TestPayloadIsNotSentWhenItsReadCannotBeRecorded(t *testing.T) {
	t.Parallel()
	srv, s := scopedServer(t)
	seedDeadEvents(t, s.Pool)
	_, err := s.Pool.Exec(t.Context(), `ALTER TABLE ops_audit RENAME TO ops_audit_away`)
	require.NoError(t, err)
	var body map[string]any
	require.Equal(t, http.StatusServiceUnavailable, send(t, http.MethodGet, srv.URL+"/v1/events/stripe/acct_a/test/evt_2?payload=true", "tok-read-payload", nil, &body))
	require.NotContains(t, string(mustJSON(t, body)), "evt_2\"}", "no payload in the answer")
	require.Equal(t, "audit_failed", body["error"].(map[string]any)["code"])
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+"/v1/events/stripe/acct_a/test/evt_2", "tok-read", nil, nil), "no payload, nothing to record")
	require.Equal(t, http.StatusServiceUnavailable, send(t, http.MethodPost, srv.URL+"/v1/replay/event/stripe/acct_a/test/evt_2", "tok-operate", nil, &body))
	require.Equal(t, "audit_failed", body["error"].(map[string]any)["code"])
}
