package cli

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/config"
)

// `hookyard dev` serves GitHub and Chargebee simulators beside Stripe's and
// points the reconciler at them: an event whose webhook never arrived (the
// receiver was unreachable) reaches the inbox by the reconciler — the
// Chargebee one through the events scan, the GitHub one by a redelivery.
// Fails if dev does not wire the simulators or the reconcile sources.
func TestDevReconcilesChargebeeAndGitHubThroughTheirSimulators(t *testing.T) {
	embeddedKafkaPort = 0 // not parallel: the other dev test sets it too
	s := dbtest.NewWithConns(t, 30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	simAddr := freeAddr(t)
	vars := map[string]string{"HTTP_ADDR": freeAddr(t), "OPS_ADDR": freeAddr(t)}
	cfg, err := config.Parse([]byte(`
endpoints:
  - {id: cb, provider: chargebee, source_account: site, environment: test, secrets: ["u:p"], api_key: cb_key}
  - id: gh
    provider: github
    source_account: org
    environment: prod
    secrets: [ghs]
    github_hook: {repo: org/repo, hook_id: 3, token: ghp_x}
kafka:
  partitions: 2
reconciler:
  interval: 200ms
`), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	require.NoError(t, err)
	e := &env{cfg: cfg, log: pipelinetest.Logger(t), pool: s.Pool, reg: newRegistry()}
	done := make(chan error, 1)
	go func() { done <- runDev(ctx, e, simAddr) }()

	post := func(path, body string) {
		t.Helper()
		var resp *http.Response
		require.Eventually(t, func() bool {
			var err error
			resp, err = http.Post("http://"+simAddr+path, "application/json", strings.NewReader(body))
			return err == nil
		}, 30*time.Second, 20*time.Millisecond)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	post("/chargebee/sim/down", `{"down": true}`)
	post("/chargebee/sim/subscriptions", `{"id": "cb_sub", "status": "active"}`)
	post("/github/sim/down", `{"down": true}`)
	post("/github/sim/deliveries", `{"event": "push", "payload": {"repository": {"full_name": "org/repo"}}}`)
	post("/github/sim/down", `{"down": false}`)

	require.Eventually(t, func() bool {
		var cb, gh int
		err := s.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE provider = 'chargebee' AND status = 'processed'),
       count(*) FILTER (WHERE provider = 'github' AND status = 'processed') FROM webhook_inbox`).Scan(&cb, &gh)
		return err == nil && cb == 1 && gh == 1
	}, 60*time.Second, 50*time.Millisecond, "both lost events reach the inbox through the reconciler and are processed")
	cancel()
	require.NoError(t, <-done)
}
