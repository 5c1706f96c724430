package cli

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/freeport"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/config"
)

// freeAddr is an address for dev to bind later: see freeport for why not
// port 0.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	require.NoError(t, err)
	return addr
}

// After a stop with a large backlog, `hookyard dev` answers on the receiver's
// port at once: it listens first and re-publishes pending events in the
// background, in batches. Here the re-publish cannot finish (another
// transaction holds the outbox) and the receiver must answer anyway; once
// the outbox is free every pending event goes out. Fails if the re-publish
// runs before the services start again.
func TestDevAnswersBeforeRepublishingABacklog(t *testing.T) {
	embeddedKafkaPort = 0 // not parallel: no other test in this package runs dev
	s := dbtest.NewWithConns(t, 30)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := s.Pool.Exec(ctx, `
INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, payload, received_at)
SELECT 'github', 'dev-org', 'prod', 'evt_' || i, 'github-dev', 'ping', '{}', now() - interval '1 hour'
FROM generate_series(1, 3000) AS i`)
	require.NoError(t, err)

	// Hold the outbox so that no re-publish statement can insert.
	blocker, err := s.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback(context.Background()) }()
	_, err = blocker.Exec(ctx, `LOCK TABLE outbox IN SHARE ROW EXCLUSIVE MODE`)
	require.NoError(t, err)

	vars := map[string]string{"HTTP_ADDR": freeAddr(t), "OPS_ADDR": freeAddr(t)}
	cfg, err := config.Parse([]byte("endpoints: []\nkafka:\n  partitions: 2\n"), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	require.NoError(t, err)
	e := &env{cfg: cfg, log: pipelinetest.Logger(t), pool: s.Pool, reg: newRegistry()}
	done := make(chan error, 1)
	go func() { done <- runDev(ctx, e, "127.0.0.1:0") }()

	answered := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !answered; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + cfg.HTTPAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			answered = resp.StatusCode == http.StatusOK
		}
	}
	require.True(t, answered, "the receiver answers while the backlog waits to be re-published")
	var republished int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE next_attempt_at IS NOT NULL`).Scan(&republished))
	require.Zero(t, republished, "the re-publish is still blocked")

	require.NoError(t, blocker.Rollback(ctx))
	deadline := time.Now().Add(60 * time.Second)
	for {
		require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE status = 'pending' AND next_attempt_at IS NULL`).Scan(&republished))
		if republished == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d events never re-published", republished)
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	require.NoError(t, <-done)
}
