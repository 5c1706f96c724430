package reconciler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/internal/testkit/promread"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/pkg/retention"
	"github.com/hookyard/hookyard/reconciler"
)

func labelled(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	v, _, err := promread.Sum(reg, name, labels)
	require.NoError(t, err)
	return v
}

func eventStatus(t *testing.T, p *pipelinetest.Pipeline, id string) string {
	t.Helper()
	var s string
	require.NoError(t, p.Pool.QueryRow(context.Background(), `SELECT status FROM webhook_inbox WHERE event_id = $1`, id).Scan(&s))
	return s
}

// insertLost stores a pending Stripe event an hour old that never reached
// Kafka (no outbox row): its record is lost.
func insertLost(t *testing.T, p *pipelinetest.Pipeline, eventID, subID string) {
	t.Helper()
	_, err := p.Pool.Exec(context.Background(), `
INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, resource_type, resource_id, payload, received_at)
VALUES ('stripe', $1, 'test', $2, $3, 'customer.subscription.updated', 'subscription', $4,
        jsonb_build_object('id', $2::text, 'type', 'customer.subscription.updated', 'data', jsonb_build_object('object', jsonb_build_object('id', $4::text))),
        now() - interval '1 hour')`,
		pipelinetest.StripeAccount, eventID, pipelinetest.StripeEndpoint, subID)
	require.NoError(t, err)
}

// An event that is merely slow — published, waiting for a processor that is
// behind — is never published again; one whose record the group read past
// while it stayed pending is lost, and is. Fails if pending age alone makes
// the reconciler re-publish (duplicate work exactly when the system is
// behind), or if a lost event is never re-published.
func TestReconcilerRepublishesOnlyLostEventsNotSlowOnes(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, NoProcessor: true})
	ctx := context.Background()
	p.Sim.Put(stripesim.Subscription{ID: "sub_slow", Customer: "cus", Status: "active"})
	p.Sim.Put(stripesim.Subscription{ID: "sub_lost", Customer: "cus", Status: "active"})

	// The slow one goes through intake and the relay to Kafka, where no
	// processor reads it yet.
	_, err := inbox.Insert(ctx, p.Pool, []*inbox.Record{{Endpoint: &p.Endpoints[0], Event: provider.Event{
		ID: "evt_slow", Type: "customer.subscription.updated", ResourceType: "subscription", ResourceID: "sub_slow",
		Payload: []byte(`{"id":"evt_slow","type":"customer.subscription.updated","data":{"object":{"id":"sub_slow"}}}`)}}}, time.Now())
	require.NoError(t, err)
	p.Eventually(func() bool {
		var n int
		return p.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n) == nil && n == 0
	}, "the relay published evt_slow")
	_, err = p.Pool.Exec(ctx, `UPDATE webhook_inbox SET received_at = now() - interval '1 hour' WHERE event_id = 'evt_slow'`)
	require.NoError(t, err)
	insertLost(t, p, "evt_lost", "sub_lost")

	reg := prometheus.NewRegistry()
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{StuckAfter: time.Minute, Registerer: reg, Progress: groupProgress(p)})
	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "the group has not read past either record: both may be slow")
	require.Equal(t, 2.0, labelled(t, reg, "hookyard_reconciler_published_pending_events", nil))
	var outbox int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&outbox))
	require.Zero(t, outbox)

	p.StartProcessor("p1", nil)
	p.Eventually(func() bool { return eventStatus(t, p, "evt_slow") == inbox.StatusProcessed }, "evt_slow processed")
	prog := groupProgress(p)
	p.Eventually(func() bool {
		pp, err := prog.Progress(ctx)
		return err == nil && pp[0].Consumed >= 1
	}, "the group committed past evt_slow")

	n, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the group read past the mark and evt_lost is still pending: lost")
	p.Eventually(func() bool { return eventStatus(t, p, "evt_lost") == inbox.StatusProcessed }, "evt_lost processed")
	require.Equal(t, 1.0, labelled(t, reg, "hookyard_reconciler_checks_enqueued_total", map[string]string{"reason": "stuck"}))
	var slowFetches int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM projection_history WHERE event_id = 'evt_slow'`).Scan(&slowFetches))
	require.Equal(t, 1, slowFetches, "evt_slow handled once")
}

type failingLister struct{}

func (failingLister) ListObjects(context.Context, string, string, string, int) ([]provider.Listed, bool, error) {
	return nil, false, errors.New("provider answered 500")
}

type fixedLister []string

func (l fixedLister) ListObjects(context.Context, string, string, string, int) ([]provider.Listed, bool, error) {
	out := make([]provider.Listed, len(l))
	for i, id := range l {
		out[i].ID = id
	}
	return out, false, nil
}

// One bad row never stops a round: payload times no conversion can hold
// (1e300, microseconds, a string) are purged like any other, and when a
// step does fail — a row whose update raises, a provider listing that
// errors — the requeue, parked and other listing steps still run, and the
// failure is counted by step. Fails if the purge can raise on a payload
// value again or if a failing step returns the round early.
func TestOneBadRowNeverStopsARound(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, NoProcessor: true})
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := p.Pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	for id, created := range map[string]string{"evt_huge": "1e300", "evt_micros": "1700000000000000", "evt_text": `"abc"`} {
		exec(`INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, payload, status, received_at)
VALUES ('stripe', $1, 'test', $2, $3, 'invoice.paid', jsonb_build_object('created', $4::jsonb), 'processed', now() - interval '31 days')`,
			pipelinetest.StripeAccount, id, pipelinetest.StripeEndpoint, created)
	}
	insertLost(t, p, "evt_lost_1", "sub_lost_1")
	exec(`INSERT INTO projection (provider, source_account, environment, resource_type, resource_id, state, status,
        fence_generation, needs_reconcile) VALUES ('chargebee', 'site', 'test', 'subscription', 'sub_parked_1', '{}', 'active', 1, true)`)

	reg := prometheus.NewRegistry()
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{Retention: &retention.Policy{PayloadAge: 30 * 24 * time.Hour, PartitionInterval: 24 * time.Hour, DeadPayloadAge: 14 * 24 * time.Hour, IdentityAge: 35 * 24 * time.Hour}, StuckAfter: time.Minute,
		Progress: groupProgress(p), Registerer: reg, Sources: []provider.Source{
			{Provider: provider.Stripe, SourceAccount: "acct_down", Environment: "test", ResourceType: "subscription", Lister: failingLister{}},
			{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount, Environment: "test", ResourceType: "subscription",
				Lister: fixedLister{"sub_listed"}},
		}})
	n, err := r.RunOnce(ctx)
	require.ErrorContains(t, err, "provider answered 500")
	require.NotContains(t, err.Error(), "purge")
	require.EqualValues(t, 3, n, "the lost event, the parked projection and the listed subscription")
	var kept int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE status = 'processed' AND payload IS NOT NULL`).Scan(&kept))
	require.Zero(t, kept, "every old payload purged, whatever its created")
	require.Equal(t, 1.0, labelled(t, reg, "hookyard_reconciler_step_failures_total", map[string]string{"step": reconciler.StepList}))
	require.Zero(t, labelled(t, reg, "hookyard_reconciler_step_failures_total", map[string]string{"step": reconciler.StepPurge}))

	// A row whose update raises fails the purge: the rest of the round runs.
	exec(`CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.event_id = 'evt_poison' AND NEW.payload IS NULL THEN RAISE EXCEPTION 'poisoned row'; END IF;
    RETURN NEW;
END $$`)
	exec(`CREATE TRIGGER poison BEFORE UPDATE ON webhook_inbox FOR EACH ROW EXECUTE FUNCTION poison()`)
	exec(`INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, payload, status, received_at)
VALUES ('stripe', $1, 'test', 'evt_poison', $2, 'invoice.paid', '{}', 'processed', now() - interval '31 days')`,
		pipelinetest.StripeAccount, pipelinetest.StripeEndpoint)
	insertLost(t, p, "evt_lost_2", "sub_lost_2")
	exec(`INSERT INTO projection (provider, source_account, environment, resource_type, resource_id, state, status,
        fence_generation, needs_reconcile) VALUES ('chargebee', 'site', 'test', 'subscription', 'sub_parked_2', '{}', 'active', 1, true)`)
	p.Eventually(func() bool {
		var n int
		return p.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n) == nil && n == 0
	}, "the relay published the first round's messages")

	n, err = r.RunOnce(ctx)
	require.ErrorContains(t, err, "poisoned row")
	require.ErrorContains(t, err, "provider answered 500")
	require.EqualValues(t, 2, n, "sub_parked_2 and sub_listed")
	require.Equal(t, 1.0, labelled(t, reg, "hookyard_reconciler_step_failures_total", map[string]string{"step": reconciler.StepPurge}))
	require.Equal(t, 2.0, labelled(t, reg, "hookyard_reconciler_step_failures_total", map[string]string{"step": reconciler.StepList}))
	// The requeue step ran after the failed purge: it found evt_lost_2
	// published and, with no processor reading the partition, waiting.
	require.Equal(t, 1.0, labelled(t, reg, "hookyard_reconciler_published_pending_events", nil))
}

// A parked resource of a provider whose checks cannot fetch it (no API
// client) gets one check and counts as one divergence, however many rounds
// pass; a provider that can fetch is checked again while it stays parked,
// still counted once. Fails if parked resources are re-checked and
// re-counted every round again.
func TestParkedResourceIsCheckedAndCountedOncePerParking(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{NoProcessor: true})
	ctx := context.Background()
	_, err := p.Pool.Exec(ctx, `
INSERT INTO projection (provider, source_account, environment, resource_type, resource_id, state, status,
                                     fence_generation, needs_reconcile, needs_reconcile_reason)
VALUES ('chargebee', 'site', 'test', 'subscription', 'sub_cb', '{}', 'active', 1, true, 'version conflict: test'),
       ('stripe', $1, 'test', 'subscription', 'sub_st', '{}', 'active', 1, true, 'unordered: test')`, pipelinetest.StripeAccount)
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: reg, FetchProviders: []string{provider.Stripe},
		ParkedRecheck: time.Nanosecond})
	for range 3 {
		_, err := r.RunOnce(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 4.0, labelled(t, reg, "hookyard_reconciler_checks_enqueued_total", map[string]string{"reason": "parked"}),
		"chargebee once, stripe every round")
	require.Equal(t, 1.0, labelled(t, reg, "hookyard_reconciler_divergences_total", map[string]string{"provider": "chargebee", "kind": "parked"}))
	require.Equal(t, 1.0, labelled(t, reg, "hookyard_reconciler_divergences_total", map[string]string{"provider": "stripe", "kind": "parked"}))

	var parked, checked int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE needs_reconcile), count(reconcile_checked_at)
FROM projection`).Scan(&parked, &checked))
	require.Equal(t, 2, parked, "a check that cannot resolve it leaves it parked")
	require.Equal(t, 2, checked)
}
