package processor_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/internal/testkit/promread"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/processor"
)

// metric finds the series of name whose labels include want (nil when none).
func metric(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) *dto.Metric {
	t.Helper()
	ms, _, err := promread.Series(reg, name, want)
	require.NoError(t, err)
	if len(ms) == 0 {
		return nil
	}
	return ms[0]
}

// eventuallyCount waits for a histogram's count to reach want: the processor
// observes after its transaction commits, so a test that saw the commit may
// look a moment before the observation.
func eventuallyCount(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string, want uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return histogramCount(t, reg, name, labels) >= want }, 10*time.Second, 10*time.Millisecond,
		"%s%v never counted %d", name, labels, want)
	require.Equal(t, want, histogramCount(t, reg, name, labels))
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) uint64 {
	t.Helper()
	if m := metric(t, reg, name, labels); m != nil {
		return m.GetHistogram().GetSampleCount()
	}
	return 0
}

// Receive-to-apply lag is observed once per event whose projection write
// committed (a versioned snapshot applied, a hint's fetched state written)
// and never for an event that changed nothing (stale). Fails if the
// observation is removed or made for every event.
func TestReceiveToApplyLagObservedForWrites(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) { c.Registerer = reg }})
	const name = "hookyard_processor_receive_to_apply_seconds"
	cb := map[string]string{"provider": provider.Chargebee}
	r := scCBRes("sub_lag")
	now := time.Now().Unix()

	scPostCB(t, p, scCBEvent("ev_lag_2", "subscription_changed", r.ID, "active", 2, now))
	scWaitStatus(t, p, scCBKey("ev_lag_2"), inbox.StatusProcessed)
	eventuallyCount(t, reg, name, cb, 1)
	scPostCB(t, p, scCBEvent("ev_lag_1", "subscription_changed", r.ID, "trialing", 1, now-10))
	row := scWaitStatus(t, p, scCBKey("ev_lag_1"), inbox.StatusProcessed)
	require.Equal(t, projection.Stale, *row.Outcome)
	require.EqualValues(t, 1, histogramCount(t, reg, name, cb), "a stale event wrote nothing")

	s := scSub("sub_lag_hint", "active")
	p.Sim.Put(s)
	hint := scSend(t, p, "customer.subscription.updated", s)
	scWaitStatus(t, p, scStripeKey(hint), inbox.StatusProcessed)
	eventuallyCount(t, reg, name, map[string]string{"provider": provider.Stripe}, 1)
	m := metric(t, reg, name, cb)
	require.Greater(t, m.GetHistogram().GetSampleSum(), 0.0)
	require.Less(t, m.GetHistogram().GetSampleSum(), 60.0)

	// A replay fetches and writes again, but its lag would be measured from
	// the original arrival (days, after a replay of old events): not observed.
	n, err := inbox.Replay(context.Background(), p.Pool, scStripeKey(hint))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	p.Eventually(func() bool { return len(scHistory(t, p, pipelinetest.Resource("sub_lag_hint"))) >= 2 }, "the replay was handled")
	p.WaitIdle()
	require.EqualValues(t, 1, histogramCount(t, reg, name, map[string]string{"provider": provider.Stripe}), "a replay was observed")
}

// Failures are counted by provider and event type only — never by
// resource — and a 404 from the provider is recorded as fetch_not_found,
// not as a state. Fails if the counter is removed, gains a per-resource
// label, or if not-found fetches stop being told apart.
func TestFailuresCountedByProviderAndEventType(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) { c.Registerer = reg; c.MaxAttempts = 1 }})
	const name = "hookyard_processor_failures_total"
	require.Zero(t, testutil.CollectAndCount(reg, name))

	for _, id := range []string{"sub_nf_1", "sub_nf_2"} {
		ev := scSend(t, p, "customer.subscription.updated", scSub(id, "active")) // the simulator has no such subscription
		scWaitStatus(t, p, scStripeKey(ev), inbox.StatusDead)
		h := scHistoryOf(scHistory(t, p, pipelinetest.Resource(id)), ev)
		require.Len(t, h, 1)
		require.Equal(t, projection.FetchNotFound, h[0].Outcome)
		require.Contains(t, h[0].Detail, "not found")
	}
	p.Sim.SetFailure(http.StatusServiceUnavailable)
	ev := scSend(t, p, "customer.subscription.created", scSub("sub_503", "active"))
	scWaitStatus(t, p, scStripeKey(ev), inbox.StatusDead)
	require.Equal(t, projection.FetchFailed, scHistoryOf(scHistory(t, p, pipelinetest.Resource("sub_503")), ev)[0].Outcome)

	require.Equal(t, 2, testutil.CollectAndCount(reg, name), "one series per provider and type, none per resource")
	upd := metric(t, reg, name, map[string]string{"provider": provider.Stripe, "type": "customer.subscription.updated"})
	require.NotNil(t, upd)
	require.Len(t, upd.GetLabel(), 2)
	require.Equal(t, 2.0, upd.GetCounter().GetValue())
	created := metric(t, reg, name, map[string]string{"provider": provider.Stripe, "type": "customer.subscription.created"})
	require.NotNil(t, created)
	require.Equal(t, 1.0, created.GetCounter().GetValue())
}

// Consumer lag per partition follows what this processor's group has not
// committed: it shows the records of a partition whose worker is stuck on a
// batch, 0 for the partition with nothing to do, and drops to 0 once the
// batch is written and committed. Fails if the gauge is removed or does
// not follow the group's commits.
func TestConsumerLagPerPartition(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{NoProcessor: true, Partitions: 2})
	const name = "hookyard_processor_consumer_lag"
	s := scSub("sub_lagging", "active")
	p.Sim.Put(s)
	for range 3 {
		scSend(t, p, "customer.subscription.updated", s)
	}
	p.Eventually(func() bool { return scCount(t, p, `SELECT count(*) FROM outbox`) == 0 }, "relay published")
	recs := p.Records(3)
	require.Len(t, recs, 3)
	part, other := strconv.Itoa(int(recs[0].Partition)), strconv.Itoa(int(1-recs[0].Partition))

	gate := &gatedFetcher{inner: stripe.Fetcher{Client: p.Stripe}, fetched: make(chan string, 1), release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(gate.release) }) }
	t.Cleanup(release)
	reg := prometheus.NewRegistry()
	p.StartProcessor("lagging", func(c *processor.Config) {
		c.Registerer = reg
		c.Fetchers = map[string]provider.Fetcher{provider.Stripe: gate}
	})
	select {
	case <-gate.fetched:
	case <-time.After(30 * time.Second):
		t.Fatal("worker never fetched")
	}
	lag := func(partition string) float64 {
		m := metric(t, reg, name, map[string]string{"topic": p.Kafka.Topic, "partition": partition})
		if m == nil {
			return -1
		}
		return m.GetGauge().GetValue()
	}
	p.Eventually(func() bool { return lag(part) == 3 && lag(other) == 0 }, "lag 3 on the stuck partition, 0 on the other")

	release()
	p.WaitIdle()
	p.Eventually(func() bool { return lag(part) == 0 }, "lag 0 once committed")
	require.Equal(t, 2, testutil.CollectAndCount(reg, name))
}

// A reconciliation check records what it found against the projection, and
// counts divergences: a projection the provider disagrees with, then (the
// check having written the provider's state) in sync. Fails without the
// previous-state readback of the fetched write or the finding.
func TestReconcileCheckRecordsWhatItFound(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) { c.Registerer = reg }})
	ctx := context.Background()
	r := pipelinetest.Resource("sub_checked")
	_, err := p.Pool.Exec(ctx, `
INSERT INTO projection (provider, source_account, environment, resource_type, resource_id, state, status, fence_generation)
VALUES ($1, $2, $3, $4, $5, '{"id":"sub_checked","status":"active"}', 'active', 0)`, r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID)
	require.NoError(t, err)
	p.Sim.Put(scSub(r.ID, "canceled"))

	check := func() projection.HistoryEntry {
		t.Helper()
		before := len(scHistory(t, p, r))
		_, err := p.Pool.Exec(ctx, `
INSERT INTO outbox (message_key, message) VALUES ($1, jsonb_build_object('kind', 'check', 'provider', $2::text, 'source_account', $3::text,
    'environment', $4::text, 'resource_type', $5::text, 'resource_id', $6::text, 'reason', 'reconcile'))`,
			r.Key(), r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID)
		require.NoError(t, err)
		var h []projection.HistoryEntry
		p.Eventually(func() bool { h = scHistory(t, p, r); return len(h) > before }, "check recorded")
		return h[0]
	}
	const name = "hookyard_processor_check_divergences_total"
	stripe := map[string]string{"provider": provider.Stripe}

	h := check()
	require.Equal(t, projection.Fetched, h.Outcome)
	require.Empty(t, h.EventID)
	require.NotNil(t, h.Previous)
	require.Equal(t, "active", *h.Previous)
	require.Equal(t, "canceled", h.Status)
	require.Contains(t, h.Detail, "diverged: projection had active, provider has canceled")
	scCounterReaches(t, reg, name, "provider", provider.Stripe, 1)

	h = check()
	require.Equal(t, "canceled", *h.Previous)
	require.Contains(t, h.Detail, "in sync")
	require.Equal(t, 1.0, metric(t, reg, name, stripe).GetCounter().GetValue(), "an in-sync check is no divergence")
}

// Two different snapshots of one version: the first stays, and nobody is
// left unaware — the event's decision is conflict, the projection is parked
// for reconciliation, and hookyard_projection_version_conflicts_total
// counts it by provider. Fails if the counter is removed or a conflict
// leaves the projection unmarked.
func TestEqualVersionConflictIsCountedAndParked(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) { c.Registerer = reg }})
	const name = "hookyard_projection_version_conflicts_total"
	r := scCBRes("sub_conflict")
	now := time.Now().Unix()

	scPostCB(t, p, scCBEvent("ev_conf_a", "subscription_changed", r.ID, "active", 5, now))
	scWaitStatus(t, p, scCBKey("ev_conf_a"), inbox.StatusProcessed)
	scPostCB(t, p, scCBEvent("ev_conf_b", "subscription_changed", r.ID, "past_due", 5, now))
	row := scWaitStatus(t, p, scCBKey("ev_conf_b"), inbox.StatusProcessed)
	require.Equal(t, projection.Conflict, *row.Outcome)
	scCounterReaches(t, reg, name, "provider", provider.Chargebee, 1)
	pr := scProjection(t, p, r)
	require.Equal(t, "active", pr.Status, "the first snapshot stays")
	require.True(t, pr.NeedsReconcile)
	require.Contains(t, pr.NeedsReconcileReason, "ev_conf_b")
}
