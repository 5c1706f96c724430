package processor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/internal/testkit/promread"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
)

// gatedFetcher fetches for real, then holds the result until released: a
// worker paused on the provider API with a stale answer in hand.
type gatedFetcher struct {
	inner   provider.Fetcher
	fetched chan string
	release chan struct{}
}

func (g *gatedFetcher) Fetch(ctx context.Context, r message.Resource) (provider.Fetched, error) {
	f, err := g.inner.Fetch(ctx, r)
	g.fetched <- f.Status
	<-g.release
	return f, err
}

// counterValue sums every series of a counter (0 when it has none).
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	v, _, err := promread.Sum(reg, name, nil)
	require.NoError(t, err)
	return v
}

// Invariant 6: a worker that lost its partition while it waited on the
// provider API cannot write after the new owner took over. Without the fence
// check in the write transaction, the zombie's stale "active" overwrites the
// new owner's "canceled". The refused write is recorded as "fenced".
func TestZombieWorkerCannotOverwriteNewOwner(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, NoProcessor: true})
	ctx := context.Background()
	res := pipelinetest.Resource("sub_zombie")

	s := stripesim.Subscription{ID: "sub_zombie", Customer: "cus_z", Status: "active", CurrentPeriodEnd: time.Now().Add(720 * time.Hour).Unix()}
	p.Sim.Put(s)

	gate := &gatedFetcher{inner: stripe.Fetcher{Client: p.Stripe}, fetched: make(chan string, 1), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(gate.release) }) }
	t.Cleanup(release)
	regA := prometheus.NewRegistry()
	_, stopA := p.StartProcessor("zombie", func(c *processor.Config) {
		c.Fetchers = map[string]provider.Fetcher{provider.Stripe: gate}
		c.Registerer = regA
		c.RevokeGrace = 200 * time.Millisecond
	})

	_, _, err := p.Sim.Send(ctx, "customer.subscription.updated", s)
	require.NoError(t, err)
	select {
	case st := <-gate.fetched:
		require.Equal(t, "active", st)
	case <-time.After(30 * time.Second):
		t.Fatal("zombie never fetched")
	}

	// While the first worker holds "active", the subscription is canceled
	// and the worker loses its partition.
	s.Status, s.CanceledAt = "canceled", time.Now().Unix()
	p.Sim.Put(s)
	_, _, err = p.Sim.Send(ctx, "customer.subscription.deleted", s)
	require.NoError(t, err)
	stopA()

	_, _ = p.StartProcessor("new-owner", nil)
	p.Eventually(func() bool {
		pr, ok := p.Projection(res)
		return ok && pr.Status == "canceled"
	}, "new owner writes canceled")
	before, _ := p.Projection(res)

	release()
	p.Eventually(func() bool { return counterValue(t, regA, "hookyard_processor_fenced_writes_total") == 1 },
		"zombie's write refused by the fence")

	after, ok := p.Projection(res)
	require.True(t, ok)
	require.Equal(t, "canceled", after.Status, "the zombie overwrote the new owner's state")
	require.Equal(t, before.Generation, after.Generation)
	require.Equal(t, before.UpdatedAt, after.UpdatedAt)
	d, _ := p.Access("sub_zombie")
	require.False(t, d.Access)

	// The refused write is on the record, for `hookyard explain`.
	hist, err := projection.History(ctx, p.Pool, res, 100)
	require.NoError(t, err)
	var fenced []projection.HistoryEntry
	for _, h := range hist {
		if h.Outcome == projection.Fenced {
			fenced = append(fenced, h)
		}
	}
	require.Len(t, fenced, 1, "%+v", hist)
	require.Less(t, fenced[0].Generation, after.Generation)
	require.Contains(t, fenced[0].Detail, "partition fenced")
}

// Two processors in one group, a third joining and the first leaving while
// events flow: every subscription ends in the provider's final state, and
// every event is handled exactly once in the inbox.
func TestRebalancesUnderLoadKeepFinalState(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 6, NoProcessor: true})
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	_, stop1 := p.StartProcessor("m1", func(c *processor.Config) { c.Registerer = reg })
	_, _ = p.StartProcessor("m2", nil)

	const subs, rounds = 30, 4
	statuses := []string{"trialing", "active", "past_due", "active", "canceled"}
	var wg sync.WaitGroup
	for i := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("sub_rb_%02d", i)
			for r := range rounds + 1 {
				st := statuses[r%len(statuses)]
				if r == rounds {
					st = []string{"active", "canceled"}[i%2]
				}
				s := stripesim.Subscription{ID: id, Customer: "cus", Status: st}
				p.Sim.Put(s)
				_, code, err := p.Sim.Send(ctx, "customer.subscription.updated", s)
				if err != nil || code != 200 {
					t.Errorf("send %s: %d %v", id, code, err)
					return
				}
			}
		}()
		if i == subs/3 {
			_, _ = p.StartProcessor("m3", nil)
		}
		if i == 2*subs/3 {
			stop1()
		}
	}
	wg.Wait()
	p.WaitIdle()
	for i := range subs {
		id := fmt.Sprintf("sub_rb_%02d", i)
		want := []string{"active", "canceled"}[i%2]
		pr, ok := p.Projection(pipelinetest.Resource(id))
		require.True(t, ok, id)
		require.Equal(t, want, pr.Status, id)
	}
	var notProcessed int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE status <> 'processed'`).Scan(&notProcessed))
	require.Zero(t, notProcessed)
}
