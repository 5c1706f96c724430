package outboxrelay_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/fence"
)

// topicRecords is how many records the topic holds, over all partitions.
func topicRecords(t *testing.T, k *kafkatest.Cluster) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), k.Topic)
	require.NoError(t, err)
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

// Keys map to partitions by the partition count, so a relay publishing to a
// topic whose count differs from the one the processors' fences recorded
// would put a key's new records on another partition than its backlog. The
// relay refuses (rows stay in the outbox, a metric and a log say why) until
// the count is recorded again (`hookyard fence resize`), then drains. Fails
// if the relay publishes without comparing the counts.
func TestRelayRefusesToPublishWhenTopicPartitionCountChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	k := kafkatest.New(t, 4)
	require.NoError(t, fence.Register(ctx, s.Pool, k.Topic, 4))
	reg := prometheus.NewRegistry()
	start(t, s, k, outboxrelay.Config{Registerer: reg, PartitionCheckInterval: 50 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	fill(t, s, 100)
	waitEmpty(t, s, 30*time.Second)
	require.Equal(t, int64(100), topicRecords(t, k))

	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	require.NoError(t, err)
	resp, err := kadm.NewClient(cl).CreatePartitions(ctx, 2, k.Topic)
	cl.Close()
	require.NoError(t, err)
	require.NoError(t, resp.Error())

	require.Eventually(t, func() bool { return metric(t, reg, "hookyard_outbox_partition_count_changed") == 1 },
		30*time.Second, 10*time.Millisecond, "the relay did not notice the topic grew")
	fill(t, s, 100)
	refused := metric(t, reg, "hookyard_outbox_partition_refusals_total")
	require.Eventually(t, func() bool { return metric(t, reg, "hookyard_outbox_partition_refusals_total") >= refused+3 },
		30*time.Second, 10*time.Millisecond, "the relay stopped looking")
	require.Equal(t, 100, count(t, s), "rows left the outbox for a topic with another partition count")
	require.Equal(t, int64(100), topicRecords(t, k))

	// The operator records the new count: the relay publishes again.
	require.NoError(t, fence.Resize(ctx, s.Pool, k.Topic, 6))
	waitEmpty(t, s, 30*time.Second)
	require.Equal(t, int64(200), topicRecords(t, k))
	require.Equal(t, 0.0, metric(t, reg, "hookyard_outbox_partition_count_changed"))
}
