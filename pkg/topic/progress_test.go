package topic_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/pkg/topic"
)

// The requeue decision looks up the partition an event's record went to
// from its key; that must be where a producer with the default partitioner
// (the outbox relay's) put it. Fails if PartitionOf hashes differently.
func TestPartitionOfIsWhereTheDefaultProducerPutsAKey(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, 8)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Brokers...), kgo.DefaultProduceTopic(kc.Topic))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	ctx := context.Background()
	for i := range 50 {
		key := fmt.Sprintf("stripe/acct_%d/test/subscription/sub_%d", i%3, i)
		r, err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte("x")}).First()
		require.NoError(t, err)
		require.Equal(t, r.Partition, topic.PartitionOf(key, 8), key)
	}
	p, err := topic.GroupProgress{Client: cl, Topic: kc.Topic, Group: kc.Group}.Progress(ctx)
	require.NoError(t, err)
	require.Len(t, p, 8)
	var end int64
	for _, pp := range p {
		require.True(t, pp.Known)
		require.Zero(t, pp.Consumed, "a group that committed nothing starts at the log start")
		end += pp.End
	}
	require.EqualValues(t, 50, end)
}
