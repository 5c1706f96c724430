package processor_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/fence"
)

// A processor's host dies in the middle of its write: its backend stays idle
// in transaction, holding the fence check's FOR SHARE lock, and no FIN ever
// reaches Postgres. The next owner of the partition takes the fence within
// seconds (the orphan ends itself; the take is bounded and retried), starts
// its worker and processes the partition's events. Without the bounds the
// assign callback waits for TCP keepalive, about two hours.
func TestPartitionOfADeadHostResumesUnderItsNextOwner(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{Partitions: 1, NoProcessor: true})
	ctx := context.Background()
	_, stopFirst := p.StartProcessor("dies", nil)
	first := pipelinetest.Resource("sub_before")
	p.Sim.Put(scSub(first.ID, "active"))
	scSend(t, p, "customer.subscription.created", scSub(first.ID, "active"))
	p.WaitIdle()

	// The dead host's last write, as the worker sends it: the fence check
	// first, in a transaction on a connection of its own, and then nothing.
	topic := p.ProcessorConfig("dies").Topic
	parts, err := fence.Partitions(ctx, p.Pool, topic)
	require.NoError(t, err)
	require.Len(t, parts, 1)
	conn, err := pgx.ConnectConfig(ctx, p.Pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	b := &pgx.Batch{}
	fence.QueueCheck(b, fence.Token{Topic: topic, Partition: 0, Generation: parts[0].Generation})
	require.NoError(t, tx.SendBatch(ctx, b).Close())
	stopFirst()

	_, _ = p.StartProcessor("next", nil)
	after := pipelinetest.Resource("sub_after")
	p.Sim.Put(scSub(after.ID, "active"))
	scSend(t, p, "customer.subscription.created", scSub(after.ID, "active"))
	p.WaitIdle()
	require.Equal(t, "active", scProjection(t, p, after).Status)
}
