package processor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
)

// A worker that stops on its own (here: fenced while Kafka still assigns it
// the partition) must not block the poll loop: records keep arriving for its
// partition, and the processor must still shut down and hand the partition
// on. Without that, the poll loop waits forever on the dead worker's channel
// and the rebalance that would stop it never runs.
func TestStoppedWorkerNeverBlocksPollLoopOrShutdown(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, NoProcessor: true})
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	_, stopA := p.StartProcessor("a", func(c *processor.Config) { c.Registerer = reg; c.MaxPollRecords = 1 })

	s := stripesim.Subscription{ID: "sub_life", Customer: "cus", Status: "active"}
	p.Sim.Put(s)
	_, _, err := p.Sim.Send(ctx, "customer.subscription.updated", s)
	require.NoError(t, err)
	p.WaitIdle()

	// Someone else takes the partition's fence (an operator's forced resize).
	_, err = p.Pool.Exec(ctx, `UPDATE partition_fence SET generation = generation + 1`)
	require.NoError(t, err)
	for i := range 8 {
		s.Status = []string{"past_due", "active"}[i%2]
		p.Sim.Put(s)
		_, _, err := p.Sim.Send(ctx, "customer.subscription.updated", s)
		require.NoError(t, err)
	}
	p.Eventually(func() bool { return counterValue(t, reg, "hookyard_processor_fenced_writes_total") >= 1 }, "worker fenced")
	p.Eventually(func() bool {
		var n int
		return p.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n) == nil && n == 0
	}, "every record published to the fenced partition")

	stopped := make(chan struct{})
	go func() { stopA(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("processor did not shut down: its poll loop is blocked on a stopped worker")
	}

	_, _ = p.StartProcessor("b", nil)
	p.WaitIdle()
	pr, ok := p.Projection(pipelinetest.Resource("sub_life"))
	require.True(t, ok)
	require.Equal(t, "active", pr.Status, fmt.Sprintf("%+v", pr))
}
