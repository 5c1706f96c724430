package cli

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/ops/api"
)

// `hookyard api` (and dev) authenticate the config's scoped tokens with
// their scopes beside OPS_TOKEN with every scope.
func TestOpsAPIAuthenticatesTheConfigsScopedTokens(t *testing.T) {
	t.Parallel()
	env := map[string]string{"OPS_TOKEN": "ops-0123456789abcdef0123456789abcdef", "APP_TOKEN": "app-0123456789abcdef0123456789abcdef"}
	cfg, err := config.ParseService([]byte("ops:\n  tokens: [{name: app, token: \"${APP_TOKEN}\", scopes: [access]}]\n"),
		func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "api")
	require.NoError(t, err)
	auth := opsAuth(cfg)
	who := func(tok string) api.Principal {
		req := httptest.NewRequest("GET", "/v1/access/x", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		p, err := auth.Authenticate(req)
		require.NoError(t, err)
		return p
	}
	app := who(env["APP_TOKEN"])
	require.Equal(t, "app", app.Name)
	require.True(t, app.Has(api.ScopeAccess))
	require.False(t, app.Has(api.ScopeRead))
	ops := who(env["OPS_TOKEN"])
	require.Equal(t, config.OpsTokenName, ops.Name)
	require.True(t, ops.Has(api.ScopeOperate))
}
