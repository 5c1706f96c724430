// Package kafkatest starts an in-process Kafka (franz-go's kfake) for a test:
// a real wire-protocol broker, no Docker, closed when the test ends.
package kafkatest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Topic is the topic name tests use.
const Topic = "hookyard.events"

// Cluster is one test's broker.
type Cluster struct {
	*kfake.Cluster
	Brokers []string
}

// New starts a one-broker cluster with topic seeded at partitions.
func New(t testing.TB, partitions int32, opts ...kfake.Opt) *Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, Topic)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return &Cluster{Cluster: c, Brokers: c.ListenAddrs()}
}
