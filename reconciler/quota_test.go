package reconciler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
	"github.com/hookyard/hookyard/reconciler"
)

// bucketCounter is the processor's Stripe fetcher, counting each fetch by
// the quota share it was made under (provider.IsBackground: the smaller
// bucket Stripe's client keeps for background reads).
type bucketCounter struct {
	next provider.Fetcher
	mu   sync.Mutex
	live map[string]int
	bg   map[string]int
}

func (b *bucketCounter) Fetch(ctx context.Context, r message.Resource) (provider.Fetched, error) {
	b.mu.Lock()
	if provider.IsBackground(ctx) {
		b.bg[r.ID]++
	} else {
		b.live[r.ID]++
	}
	b.mu.Unlock()
	return b.next.Fetch(ctx, r)
}

func (b *bucketCounter) counts(id string) (live, bg int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live[id], b.bg[id]
}

func (b *bucketCounter) total() (live, bg int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range b.live {
		live += n
	}
	for _, n := range b.bg {
		bg += n
	}
	return live, bg
}

func countingPipeline(t *testing.T) (*pipelinetest.Pipeline, *bucketCounter) {
	t.Helper()
	bc := &bucketCounter{live: map[string]int{}, bg: map[string]int{}}
	p := pipelinetest.New(t, pipelinetest.Options{Processor: func(c *processor.Config) {
		bc.next = c.Fetchers[provider.Stripe]
		c.Fetchers = map[string]provider.Fetcher{provider.Stripe: bc}
	}})
	return p, bc
}

// projectLive sends a live webhook for a subscription in status and waits
// until the pipeline has applied it and is idle.
func projectLive(t *testing.T, p *pipelinetest.Pipeline, id, status string) message.Resource {
	t.Helper()
	sub := stripesim.Subscription{ID: id, Customer: "cus", Status: status, Created: time.Now().Unix()}
	p.Sim.Put(sub)
	_, _, err := p.Sim.Send(context.Background(), "customer.subscription.updated", sub)
	require.NoError(t, err)
	res := pipelinetest.Resource(id)
	p.Eventually(func() bool { pr, ok := p.Projection(res); return ok && pr.Status == status }, "%s is projected", id)
	p.WaitIdle()
	return res
}

func stripeSource(p *pipelinetest.Pipeline) provider.Source {
	client := stripe.NewClient(stripe.APIConfig{BaseURL: p.SimServer.URL, APIKey: stripesim.DevAPIKey, RatePerSecond: 1000, Burst: 1000}, p.Log)
	return provider.Source{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount, Environment: "test",
		ResourceType: "subscription", Lister: client, Terminal: stripe.SubscriptionTerminal}
}

// An account's first walk lists many historical subscriptions that have
// no projection, while live webhooks flow. The listing already carries
// each one's state: it is written as an observation of the listing's time
// through the processor's fenced write, with no provider call, so the walk
// queues no fetch on the live quota ahead of live hints; live hints are
// fetched on the live quota. Fails if each listed subscription becomes a
// check that the processor fetches on the live bucket.
func TestFirstWalkOverHistoricalSubscriptionsSpendsNoLiveQuota(t *testing.T) {
	t.Parallel()
	p, bc := countingPipeline(t)
	ctx := context.Background()
	const historical = 60
	for i := range historical {
		p.Sim.Put(stripesim.Subscription{ID: fmt.Sprintf("sub_old_%02d", i), Customer: "cus", Status: "canceled",
			Created: time.Now().Add(-time.Duration(i+1) * time.Hour).Unix()})
	}
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{PageSize: 10, Registerer: prometheus.NewRegistry(),
		Sources: []provider.Source{stripeSource(p)}})

	live := make(chan error, 1)
	go func() {
		// A live webhook during the walk: a hint whose resource is fetched.
		sub := stripesim.Subscription{ID: "sub_live", Customer: "cus", Status: "active", Created: time.Now().Unix()}
		p.Sim.Put(sub)
		_, _, err := p.Sim.Send(ctx, "customer.subscription.updated", sub)
		live <- err
	}()
	_, err := r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	require.NoError(t, <-live)

	for i := range historical {
		res := pipelinetest.Resource(fmt.Sprintf("sub_old_%02d", i))
		p.Eventually(func() bool { pr, ok := p.Projection(res); return ok && pr.Status == "canceled" }, "projection of %s matches the listing", res.ID)
	}
	p.Eventually(func() bool {
		pr, ok := p.Projection(pipelinetest.Resource("sub_live"))
		return ok && pr.Status == "active"
	}, "the live hint is applied")
	p.WaitIdle()
	liveCalls, bgCalls := bc.total()
	l, _ := bc.counts("sub_live")
	require.Equal(t, l, liveCalls, "the only live fetches are the live hint's")
	require.Zero(t, bgCalls, "the listing decided every historical subscription: nothing to fetch")
}

// A stale projection's re-check is the reconciler's work: the processor
// fetches it under the background share of the quota. Fails if a stale
// check is fetched on the live bucket.
func TestStaleRecheckSpendsOnlyTheBackgroundShare(t *testing.T) {
	t.Parallel()
	p, bc := countingPipeline(t)
	ctx := context.Background()
	projectLive(t, p, "sub_stale", "active")
	liveBefore, _ := bc.counts("sub_stale")
	_, err := p.Pool.Exec(ctx, `UPDATE projection SET observed_at = now() - interval '2 days' WHERE resource_id = 'sub_stale'`)
	require.NoError(t, err)

	// No lister: only the stale step runs.
	src := stripeSource(p)
	src.Lister = nil
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: prometheus.NewRegistry(), Sources: []provider.Source{src}})
	rep, err := r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	require.EqualValues(t, 1, rep.Sources[0].Checks)
	p.Eventually(func() bool { _, bg := bc.counts("sub_stale"); return bg == 1 }, "the stale check is fetched on the background share")
	liveAfter, _ := bc.counts("sub_stale")
	require.Equal(t, liveBefore, liveAfter, "and not on the live one")
}

// A listed state is an observation of the listing's time, written under
// the fetched_at rule: a check carrying a listing older than what a live
// fetch already observed changes nothing. Fails if a listed state is
// written whatever its age (a slow walk would undo a live fetch).
func TestOlderListingNeverOverwritesANewerObservation(t *testing.T) {
	t.Parallel()
	p, bc := countingPipeline(t)
	ctx := context.Background()
	// The walk's listing started before the live fetch did.
	var listedSeq int64
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT nextval('projection_fetch_seq')`).Scan(&listedSeq))
	res := projectLive(t, p, "sub_race", "canceled")
	history := func() int {
		var n int
		require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM projection_history WHERE resource_id = 'sub_race'`).Scan(&n))
		return n
	}
	before := history()

	// The walk listed it active before the live fetch observed it canceled.
	_, err := p.Pool.Exec(ctx, `INSERT INTO reconcile_listed (provider, source_account, environment, resource_type, resource_id,
    seq, listed_at, state, status)
VALUES ('stripe', $1, 'test', 'subscription', 'sub_race', $2, now() - interval '1 minute',
    '{"id":"sub_race","object":"subscription","status":"active"}', 'active')`, pipelinetest.StripeAccount, listedSeq)
	require.NoError(t, err)
	_, err = p.Pool.Exec(ctx, `INSERT INTO outbox (message_key, message) VALUES ($1, jsonb_build_object(
    'kind', 'check', 'provider', 'stripe', 'source_account', $2::text, 'environment', 'test', 'resource_type', 'subscription',
    'resource_id', 'sub_race', 'reason', 'reconcile', 'enqueued_at', now(), 'listed_seq', $3::int8))`,
		res.Key(), pipelinetest.StripeAccount, listedSeq)
	require.NoError(t, err)
	p.Eventually(func() bool { return history() > before }, "the check is handled")
	pr, ok := p.Projection(res)
	require.True(t, ok)
	require.Equal(t, "canceled", pr.Status, "the older listing lost to the newer observation")
	_, bg := bc.counts("sub_race")
	require.Zero(t, bg, "and cost no provider call")
	var left int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM reconcile_listed`).Scan(&left))
	require.Zero(t, left, "the listed state went with its check")
}

// A check whose listed state is gone (its record was handled, then
// delivered again after a crash before the offset commit) is not lost: the
// processor fetches the resource on the background share instead. Fails if
// a check naming a missing listing is dropped, or fetched on the live
// share.
func TestCheckWhoseListingIsGoneFetchesOnTheBackgroundShare(t *testing.T) {
	t.Parallel()
	p, bc := countingPipeline(t)
	ctx := context.Background()
	res := projectLive(t, p, "sub_gone", "active")
	liveBefore, _ := bc.counts("sub_gone")
	_, err := p.Pool.Exec(ctx, `INSERT INTO outbox (message_key, message) VALUES ($1, jsonb_build_object(
    'kind', 'check', 'provider', 'stripe', 'source_account', $2::text, 'environment', 'test', 'resource_type', 'subscription',
    'resource_id', 'sub_gone', 'reason', 'reconcile', 'enqueued_at', now(), 'listed_seq', 987654321))`,
		res.Key(), pipelinetest.StripeAccount)
	require.NoError(t, err)
	p.Eventually(func() bool { _, bg := bc.counts("sub_gone"); return bg == 1 }, "the check is fetched on the background share")
	liveAfter, _ := bc.counts("sub_gone")
	require.Equal(t, liveBefore, liveAfter, "and not on the live one")
}
