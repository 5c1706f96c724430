package processor_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/processor"
)

// firstCallGate holds the first fetch's answer until released; later
// fetches go straight through.
type firstCallGate struct {
	inner   provider.Fetcher
	calls   atomic.Int64
	fetched chan string
	release chan struct{}
}

func (g *firstCallGate) Fetch(ctx context.Context, r message.Resource) (provider.Fetched, error) {
	first := g.calls.Add(1) == 1
	f, err := g.inner.Fetch(ctx, r)
	if first {
		g.fetched <- f.Status
		<-g.release
	}
	return f, err
}

// hintOn stores a Stripe hint in the inbox and produces its message straight
// to partition part: one resource's messages on two partitions, as after
// the topic grew under running services.
func hintOn(t *testing.T, p *pipelinetest.Pipeline, cl *kgo.Client, part int32, r message.Resource, eventID string) {
	t.Helper()
	ctx := context.Background()
	_, err := p.Pool.Exec(ctx, `
INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, resource_type, resource_id, payload)
VALUES ($1, $2, $3, $4, $5, 'customer.subscription.updated', $6, $7, $8::jsonb)`,
		r.Provider, r.SourceAccount, r.Environment, eventID, pipelinetest.StripeEndpoint, r.Type, r.ID,
		`{"id":"`+eventID+`","object":"event","type":"customer.subscription.updated","data":{"object":{"id":"`+r.ID+`"}}}`)
	require.NoError(t, err)
	v, err := json.Marshal(message.Message{Kind: message.KindEvent, Resource: r, EventID: eventID,
		EventType: "customer.subscription.updated", EndpointID: pipelinetest.StripeEndpoint,
		EnqueuedAt: time.Now().UTC(), Reason: message.ReasonWebhook})
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: p.Kafka.Topic, Partition: part, Key: []byte(r.Key()), Value: v}).FirstErr())
}

// Fetched writes are monotonic: a fetch that started (by the database
// clock, before the provider call) earlier than the projection's last
// fetched observation does not overwrite it, even when two workers with
// valid fences hold one resource (its key moved to a new partition while
// its backlog sat on the old one). Fails if a fetched write is
// unconditional: the older "active" would overwrite "canceled".
func TestOlderFetchNeverOverwritesNewerFetchedObservation(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{Partitions: 2, NoProcessor: true})
	r := pipelinetest.Resource("sub_two_partitions")
	s := scSub(r.ID, "active")
	p.Sim.Put(s)
	gate := &firstCallGate{inner: stripe.Fetcher{Client: p.Stripe}, fetched: make(chan string, 1), release: make(chan struct{})}
	released := false
	release := func() {
		if !released {
			released = true
			close(gate.release)
		}
	}
	t.Cleanup(release)
	p.StartProcessor("mono", func(c *processor.Config) {
		c.Fetchers = map[string]provider.Fetcher{provider.Stripe: gate}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()

	// The old partition's worker fetches "active" and is slow to write it.
	hintOn(t, p, cl, 0, r, "evt_old_partition")
	select {
	case st := <-gate.fetched:
		require.Equal(t, "active", st)
	case <-time.After(30 * time.Second):
		t.Fatal("the first hint was never fetched")
	}
	// Meanwhile the subscription is canceled and the new partition's worker
	// fetches and writes that.
	s.Status, s.CanceledAt = "canceled", time.Now().Unix()
	p.Sim.Put(s)
	hintOn(t, p, cl, 1, r, "evt_new_partition")
	scWaitStatus(t, p, scStripeKey("evt_new_partition"), inbox.StatusProcessed)
	require.Equal(t, "canceled", scProjection(t, p, r).Status)

	release()
	row := scWaitStatus(t, p, scStripeKey("evt_old_partition"), inbox.StatusProcessed)
	require.Equal(t, projection.Stale, *row.Outcome)
	require.Equal(t, "canceled", scProjection(t, p, r).Status, "an older fetch overwrote a newer one")
	d, _ := p.Access(r.ID)
	require.False(t, d.Access)
}
