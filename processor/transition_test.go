package processor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
)

// armedGate fetches for real; once armed, it holds each result until
// released.
type armedGate struct {
	inner   provider.Fetcher
	armed   atomic.Bool
	fetched chan string
	release chan struct{}
}

func (g *armedGate) Fetch(ctx context.Context, r message.Resource) (provider.Fetched, error) {
	f, err := g.inner.Fetch(ctx, r)
	if g.armed.Load() {
		g.fetched <- f.Status
		<-g.release
	}
	return f, err
}

// failingUntil fails every fetch until open is set.
type failingUntil struct {
	inner provider.Fetcher
	open  atomic.Bool
}

func (f *failingUntil) Fetch(ctx context.Context, r message.Resource) (provider.Fetched, error) {
	if !f.open.Load() {
		return provider.Fetched{}, errors.New("provider answered 503")
	}
	return f.inner.Fetch(ctx, r)
}

func countActions(t *testing.T, p *pipelinetest.Pipeline, kind string) int {
	t.Helper()
	var n int
	require.NoError(t, p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM action WHERE kind = $1`, kind).Scan(&n))
	return n
}

// Invariants 6 and 9 for declared effects: a worker that lost its
// partition while it held a fetched cancellation records no transition
// effect, though its write would be the first to see the subscription
// canceled; the new owner records exactly one when it observes the
// cancellation itself. Fails if transition effects are recorded outside
// the batch's fenced transaction (or before its fence check).
func TestFencedOutWorkerRecordsNoTransitionEffect(t *testing.T) {
	t.Parallel()
	const kind = "subscription_canceled"
	effects := action.Effects{{Kind: kind, On: &action.Transition{Type: "subscription", To: "canceled"}}}
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, NoProcessor: true,
		Processor: func(c *processor.Config) { c.Effects = effects }})
	ctx := context.Background()
	res := pipelinetest.Resource("sub_fenced_fx")
	s := stripesim.Subscription{ID: "sub_fenced_fx", Customer: "cus_f", Status: "active", CurrentPeriodEnd: time.Now().Add(720 * time.Hour).Unix()}
	p.Sim.Put(s)

	gate := &armedGate{inner: stripe.Fetcher{Client: p.Stripe}, fetched: make(chan string, 1), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(gate.release) }) }
	t.Cleanup(release)
	regA := prometheus.NewRegistry()
	_, stopA := p.StartProcessor("zombie", func(c *processor.Config) {
		c.Fetchers = map[string]provider.Fetcher{provider.Stripe: gate}
		c.Registerer = regA
		c.RevokeGrace = 200 * time.Millisecond
	})
	_, _, err := p.Sim.Send(ctx, "customer.subscription.created", s)
	require.NoError(t, err)
	p.Eventually(func() bool { pr, ok := p.Projection(res); return ok && pr.Status == "active" }, "active projected")

	// The zombie fetches the cancellation and holds it while it loses its
	// partition.
	gate.armed.Store(true)
	s.Status, s.CanceledAt = "canceled", time.Now().Unix()
	p.Sim.Put(s)
	_, _, err = p.Sim.Send(ctx, "customer.subscription.deleted", s)
	require.NoError(t, err)
	select {
	case st := <-gate.fetched:
		require.Equal(t, "canceled", st)
	case <-time.After(30 * time.Second):
		t.Fatal("zombie never fetched")
	}
	stopA()

	// The new owner cannot reach the provider yet: the projection stays
	// active, so the zombie's write would be the transition.
	newOwner := &failingUntil{inner: stripe.Fetcher{Client: p.Stripe}}
	_, _ = p.StartProcessor("new-owner", func(c *processor.Config) {
		c.Fetchers = map[string]provider.Fetcher{provider.Stripe: newOwner}
	})
	p.Eventually(func() bool {
		var st string
		err := p.Pool.QueryRow(ctx, `SELECT status FROM webhook_inbox WHERE resource_id = 'sub_fenced_fx' AND event_type = 'customer.subscription.deleted'`).Scan(&st)
		return err == nil && st == "retrying"
	}, "new owner failing on the provider")
	release()
	p.Eventually(func() bool { return counterValue(t, regA, "hookyard_processor_fenced_writes_total") == 1 },
		"zombie's write refused by the fence")
	require.Equal(t, 0, countActions(t, p, kind), "the fenced-out worker recorded an effect")
	pr, _ := p.Projection(res)
	require.Equal(t, "active", pr.Status)

	newOwner.open.Store(true)
	p.Eventually(func() bool { return countActions(t, p, kind) == 1 }, "the new owner records the cancellation's effect")
	p.WaitIdle()
	require.Equal(t, 1, countActions(t, p, kind))
}

// Many copies of a resource's snapshots, its cancellation among them,
// delivered concurrently in any order to two processors: the cancellation's
// version is applied once, so exactly one transition effect is recorded,
// keyed by that version, whichever order the copies came in. It holds the
// invariant under real concurrency (-race); fails if concurrent copies of
// one cause could record two effects, or none.
func TestConcurrentCopiesOfACancellationRecordOneTransitionEffect(t *testing.T) {
	t.Parallel()
	const (
		kind     = "subscription_canceled"
		endpoint = "sw-conc"
		secret   = "whsec_c2VjcmV0LWZvci1jb25jdXJyZW50LWNvcGllcy10ZXN0"
		account  = "sender_conc"
	)
	effects := action.Effects{{Kind: kind, On: &action.Transition{Type: "subscription", To: "canceled"}}}
	p := pipelinetest.New(t, pipelinetest.Options{
		Endpoints: []provider.Endpoint{{ID: endpoint, Provider: provider.StandardWebhooks, SourceAccount: account, Environment: "test",
			Secrets: []string{secret}, Paths: provider.Paths{ResourceID: "data.id", State: "data", Version: "data.version"}}},
		Processor: func(c *processor.Config) { c.Effects = effects }})
	_, _ = p.StartProcessor("p2", nil)

	t0 := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	for v := 1; v <= 10; v++ {
		status := []string{"trialing", "active", "past_due"}[v%3]
		if v == 10 {
			status = "canceled"
		}
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.PostStandard(endpoint, secret, fmt.Sprintf("msg_v%d_%d", v, c), t0.Add(time.Duration(v)*time.Minute),
					map[string]any{"id": "sub_conc", "version": v, "status": status}, "subscription.updated")
			}()
		}
	}
	wg.Wait()
	p.WaitIdle()
	var subjects []string
	rows, err := p.Pool.Query(context.Background(), `SELECT subject_id FROM action WHERE kind = $1`, kind)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		subjects = append(subjects, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"subscription/sub_conc@v10"}, subjects)
}
