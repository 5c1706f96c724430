package cli

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/config"
)

// `hookyard api` (and `dev`, which builds the same handler) serves the
// operator console under /console/ on the ops address, with its strict
// Content-Security-Policy.
func TestOpsAPIServesTheConsole(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	vars := map[string]string{"OPS_TOKEN": "console-test-token"}
	cfg, err := config.Parse([]byte("endpoints: []\n"), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	require.NoError(t, err)
	e := &env{cfg: cfg, log: pipelinetest.Logger(t), pool: s.Pool, reg: newRegistry()}
	ops, _ := e.opsAPI()
	srv := httptest.NewServer(ops)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/console/login")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
}
