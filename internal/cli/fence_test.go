package cli_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/pkg/fence"
	"github.com/hookyard/hookyard/pkg/topic"
)

// `hookyard fence resize` grows the topic through Kafka's admin API, then
// records the new count and bumps every generation, so no writer fenced
// under the old count writes again; it refuses to shrink a topic, which
// Kafka cannot do. Fails if the topic is not grown on the brokers or the
// fence is not moved with it.
func TestFenceResizeGrowsTheTopicAndRefencesEveryPartition(t *testing.T) {
	kc := kafkatest.New(t, 2)
	e := newCLIEnv(t, kc)
	ctx := t.Context()
	require.NoError(t, fence.Register(ctx, e.schema.Pool, kc.Topic, 2))
	before, err := fence.Take(ctx, e.schema.Pool, kc.Topic, 0, 2, "before-resize")
	require.NoError(t, err)

	var out struct {
		Topic          string `json:"topic"`
		PartitionCount int    `json:"partition_count"`
		Previous       int    `json:"previous"`
	}
	e.runJSON(&out, "fence", "resize", "-partitions", "4")
	require.Equal(t, kc.Topic, out.Topic)
	require.Equal(t, 4, out.PartitionCount)
	require.Equal(t, 2, out.Previous)

	// A fresh client each time: a client keeps the metadata it read, and a
	// real cluster spreads the new partitions to its brokers after the call.
	require.Eventually(t, func() bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Brokers...))
		require.NoError(t, err)
		defer cl.Close()
		n, err := topic.Partitions(ctx, cl, kc.Topic)
		return err == nil && n == 4
	}, 30*time.Second, 200*time.Millisecond, "topic grown to 4 partitions on the brokers")

	var status struct {
		PartitionCount int `json:"partition_count"`
		Partitions     []struct {
			Partition  int32 `json:"partition"`
			Generation int64 `json:"generation"`
		} `json:"partitions"`
	}
	e.runJSON(&status, "fence", "status")
	require.Equal(t, 4, status.PartitionCount)
	require.Len(t, status.Partitions, 1)
	require.Equal(t, before.Generation+1, status.Partitions[0].Generation, "the writer from before the resize is fenced")
	_, err = fence.Take(ctx, e.schema.Pool, kc.Topic, 0, 2, "old-size")
	require.ErrorIs(t, err, fence.ErrPartitionCountChanged)

	code, _, stderr := e.run("fence", "resize", "-partitions", "3")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "cannot shrink")
}
