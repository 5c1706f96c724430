package processor_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/fence"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
)

// A worker fenced while Kafka still assigns its partition to it (someone
// outside the group took the fence: an operator's forced resize, a stray
// take) gives the partition back, and the partition resumes under a fresh
// fence without anyone else causing a rebalance. Fails if the fenced worker
// just exits: its partition then stalls until the next rebalance.
func TestFencedWorkerGivesPartitionBackAndItResumes(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, NoProcessor: true})
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	_, _ = p.StartProcessor("a", func(c *processor.Config) { c.Registerer = reg })

	s := stripesim.Subscription{ID: "sub_fenced_live", Customer: "cus", Status: "active"}
	p.Sim.Put(s)
	_, _, err := p.Sim.Send(ctx, "customer.subscription.created", s)
	require.NoError(t, err)
	p.WaitIdle()

	tok, err := fence.Take(ctx, p.Pool, p.Kafka.Topic, 0, 1, "outsider")
	require.NoError(t, err)

	// Events keep arriving for the partition.
	statuses := []string{"past_due", "active", "past_due", "active", "canceled"}
	var last string
	for _, st := range statuses {
		s.Status = st
		p.Sim.Put(s)
		last, _, err = p.Sim.Send(ctx, "customer.subscription.updated", s)
		require.NoError(t, err)
	}
	p.WaitIdle()
	require.Equal(t, inbox.StatusProcessed, scInbox(t, p, scStripeKey(last)).Status)
	pr := scProjection(t, p, pipelinetest.Resource(s.ID))
	require.Equal(t, "canceled", pr.Status)
	require.Greater(t, pr.Generation, tok.Generation, "written under the outsider's generation")
	require.GreaterOrEqual(t, counterValue(t, reg, "hookyard_processor_fenced_writes_total"), 1.0)
	require.GreaterOrEqual(t, scCounter(t, reg, "hookyard_processor_rejoins_total", "reason", "fenced"), 1.0)
}
