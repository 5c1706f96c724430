package processor_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/db"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
)

// Invariant 5: no database transaction is open while the processor waits on
// the provider API. While a fetch is held, no connection of this test's pool
// is inside a transaction.
func TestNoTransactionOpenDuringProviderCall(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, NoProcessor: true})
	ctx := context.Background()
	s := stripesim.Subscription{ID: "sub_notx", Customer: "cus", Status: "active"}
	p.Sim.Put(s)
	gate := &gatedFetcher{inner: stripe.Fetcher{Client: p.Stripe}, fetched: make(chan string, 1), release: make(chan struct{})}
	// The processor gets a pool of its own, named, so only its connections are watched.
	procPool, err := db.Open(ctx, dbtest.URL(), db.Options{SearchPath: p.Schema, ApplicationName: p.Schema + "-processor"})
	require.NoError(t, err)
	t.Cleanup(procPool.Close)
	_, _ = p.StartProcessorOn(procPool, "notx", func(c *processor.Config) { c.Fetchers = map[string]provider.Fetcher{provider.Stripe: gate} })
	_, _, err = p.Sim.Send(ctx, "customer.subscription.updated", s)
	require.NoError(t, err)
	select {
	case <-gate.fetched:
	case <-time.After(30 * time.Second):
		t.Fatal("no fetch")
	}
	admin, err := pgx.Connect(ctx, dbtest.URL())
	require.NoError(t, err)
	defer admin.Close(ctx)
	var inTx int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, p.Schema+"-processor").Scan(&inTx))
	close(gate.release)
	require.Zero(t, inTx, "a transaction was open while the provider call was in flight")
	p.WaitIdle()
}

// Invariant 7: marking the event processed happens in the transaction of its
// effect. When the mark cannot be written, the projection write rolls back
// with it; once the mark can be written, both land together.
func TestProcessedMarkAndEffectCommitTogether(t *testing.T) {
	t.Parallel()
	cb := provider.Endpoint{ID: "cb-tx", Provider: provider.Chargebee, SourceAccount: "site", Environment: "test", Secrets: []string{"u:p"}}
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, Endpoints: []provider.Endpoint{cb}})
	ctx := context.Background()
	_, err := p.Pool.Exec(ctx, `
CREATE FUNCTION refuse_mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'mark refused for test'; END $$;
CREATE TRIGGER refuse_mark BEFORE UPDATE OF status ON webhook_inbox
FOR EACH ROW WHEN (NEW.status = 'processed') EXECUTE FUNCTION refuse_mark();`)
	require.NoError(t, err)

	_, err = p.Pool.Exec(ctx, `
WITH ins AS (
  INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, resource_type, resource_id, resource_version, payload)
  VALUES ('chargebee', 'site', 'test', 'ev_tx', 'cb-tx', 'subscription_changed', 'subscription', 'sub_tx', 7,
          '{"id":"ev_tx","event_type":"subscription_changed","content":{"subscription":{"id":"sub_tx","status":"active","resource_version":7}}}')
  RETURNING 1)
INSERT INTO outbox (message_key, message) SELECT 'chargebee/site/test/subscription/sub_tx',
  '{"kind":"event","provider":"chargebee","source_account":"site","environment":"test","resource_type":"subscription","resource_id":"sub_tx","event_id":"ev_tx","endpoint_id":"cb-tx"}' FROM ins`)
	require.NoError(t, err)

	// The processor tries (and fails) at least twice: the outbox drains and
	// the batch is retried, yet no projection appears.
	p.Eventually(func() bool {
		var n int
		return p.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n) == nil && n == 0
	}, "published")
	time.Sleep(300 * time.Millisecond) // let a few attempts fail; the assertion below is about state, not time
	var projections int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM projection`).Scan(&projections))
	require.Zero(t, projections, "the projection was written although the event could not be marked processed")

	_, err = p.Pool.Exec(ctx, `DROP TRIGGER refuse_mark ON webhook_inbox`)
	require.NoError(t, err)
	p.WaitIdle()
	var status string
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT status FROM projection WHERE resource_id = 'sub_tx'`).Scan(&status))
	require.Equal(t, "active", status)
}
