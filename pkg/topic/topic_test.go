package topic_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/pkg/topic"
)

// Ensure answers with the size of the topic it just created. A real cluster
// spreads a new topic's metadata to its brokers after the create returns, so
// a describe right after it hears UNKNOWN_TOPIC_OR_PARTITION; Ensure must
// wait for the topic rather than fail the service that started it (kfake
// answers at once, so only `make test-kafka` can see this fail).
func TestEnsureReturnsTheSizeOfATopicItJustCreated(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Brokers...))
	require.NoError(t, err)
	defer cl.Close()
	replication := int16(1)
	if kc.Real() {
		replication = kafkatest.ReplicationDefault
	}
	for range 5 {
		name := kafkatest.UniqueName(t, "hookyard.ensure")
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = kadm.NewClient(cl).DeleteTopics(ctx, name)
		})
		n, err := topic.Ensure(t.Context(), cl, name, 4, replication)
		require.NoError(t, err)
		require.Equal(t, 4, n)
	}
}

// The changes topic keeps each key's last record only if it is compacted:
// EnsureCompacted creates it so, and refuses (never alters) an existing
// topic that deletes old records instead, on which a consumer reading from
// the beginning would miss every resource that did not change lately.
// Fails if the topic is created without cleanup.policy=compact or an
// existing delete-policy topic is accepted.
func TestEnsureCompactedCreatesACompactedTopicAndRefusesAnotherPolicy(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Brokers...))
	require.NoError(t, err)
	defer cl.Close()
	replication := int16(1)
	if kc.Real() {
		replication = kafkatest.ReplicationDefault
	}
	name := kafkatest.UniqueName(t, "hookyard.changes")
	plain := kafkatest.UniqueName(t, "hookyard.plain")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, name, plain)
	})
	n, err := topic.EnsureCompacted(t.Context(), cl, name, 3, replication)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	policy, err := topic.CleanupPolicy(t.Context(), cl, name)
	require.NoError(t, err)
	require.Equal(t, "compact", policy)

	_, err = topic.Ensure(t.Context(), cl, plain, 1, replication)
	require.NoError(t, err)
	_, err = topic.EnsureCompacted(t.Context(), cl, plain, 1, replication)
	require.ErrorIs(t, err, topic.ErrNotCompacted)
}

// A broker that does not host a topic created a moment ago answers its
// describe with UNKNOWN_TOPIC_OR_PARTITION (a real cluster, right after the
// create: `make test-kafka` saw it). EnsureCompacted asks again rather than
// failing the service that created the topic. Here the embedded broker
// answers the first two describes of the topic's configs that way. Fails if
// EnsureCompacted gives up at the first such answer.
func TestEnsureCompactedWaitsForABrokerThatDoesNotHostTheNewTopicYet(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	defer c.Close()
	var refused atomic.Int64
	c.ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if refused.Add(1) > 2 {
			return nil, nil, false
		}
		r := req.(*kmsg.DescribeConfigsRequest)
		resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rr := range r.Resources {
			res := kmsg.NewDescribeConfigsResponseResource()
			res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
			res.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Resources = append(resp.Resources, res)
		}
		return resp, nil, true
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	n, err := topic.EnsureCompacted(t.Context(), cl, "hookyard.changes", 3, 1)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Greater(t, refused.Load(), int64(2), "the describe was answered unknown, then asked again")
}
