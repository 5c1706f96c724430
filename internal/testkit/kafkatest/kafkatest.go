// Package kafkatest gives a test a Kafka: by default an in-process broker
// (franz-go's kfake: a real wire-protocol broker, no Docker, closed when the
// test ends); with KAFKA_BROKERS set (`make test-kafka`), a topic of its own
// on that real cluster, created with replication factor 3 where the cluster
// has three brokers and deleted when the test ends. Tests share a real
// cluster, so a test never names a topic or a consumer group itself: it uses
// Cluster.Topic and Cluster.Group.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic is the topic name of an in-process cluster (each test has its own
// broker there, so one name serves all).
const Topic = "hookyard.events"

// ChangesTopic is the compacted changes topic of an in-process cluster.
const ChangesTopic = "hookyard.changes"

// BrokersEnv names the variable that points the tests at a real cluster:
// a comma-separated bootstrap list. Empty means in-process kfake.
const BrokersEnv = "KAFKA_BROKERS"

// ReplicationDefault is the replication factor of a test topic on a real
// cluster of at least that many brokers (fewer brokers: one replica each).
const ReplicationDefault = 3

// topicReadyTimeout bounds the wait for a new topic's partition leaders.
const topicReadyTimeout = 60 * time.Second

// Cluster is one test's Kafka.
type Cluster struct {
	// Cluster is the in-process broker; nil on a real cluster.
	*kfake.Cluster
	// Brokers is the bootstrap list.
	Brokers []string
	// Topic is this test's topic.
	Topic string
	// ChangesTopic is this test's compacted changes topic, with as many
	// partitions as Topic.
	ChangesTopic string
	// Group is a consumer group name of this test's own.
	Group string
}

// RealBrokers returns the brokers of KAFKA_BROKERS, or nil when it is empty.
func RealBrokers() []string {
	var out []string
	for _, b := range strings.Split(os.Getenv(BrokersEnv), ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// Real reports whether this cluster is a real one (KAFKA_BROKERS).
func (c *Cluster) Real() bool { return c.Cluster == nil }

// New gives the test a topic with partitions: on the real cluster of
// KAFKA_BROKERS when set, else on a new one-broker kfake cluster (opts apply
// to kfake only).
func New(t testing.TB, partitions int32, opts ...kfake.Opt) *Cluster {
	t.Helper()
	if brokers := RealBrokers(); len(brokers) > 0 {
		return newReal(t, brokers, partitions)
	}
	return NewFake(t, partitions, opts...)
}

// NewFake starts a one-broker kfake cluster whatever KAFKA_BROKERS says: for
// a test whose point is an address that stops answering (Close), not Kafka.
func NewFake(t testing.TB, partitions int32, opts ...kfake.Opt) *Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, Topic)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.CreateTopic(ChangesTopic, partitions, map[string]string{"cleanup.policy": "compact"}))
	return &Cluster{Cluster: c, Brokers: c.ListenAddrs(), Topic: Topic, ChangesTopic: ChangesTopic, Group: "test-processors"}
}

// SkipOnReal skips a test that needs kfake's request hooks (ControlKey) to
// inject a fault a real broker cannot be told to make; counterpart names the
// test that covers the same behaviour on a real cluster. It skips only under
// KAFKA_BROKERS: `make test` always runs the test.
func SkipOnReal(t testing.TB, counterpart string) {
	t.Helper()
	if len(RealBrokers()) > 0 {
		t.Skipf("needs kfake fault injection; the real-cluster counterpart is %s", counterpart)
	}
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// UniqueName is prefix, the test's name and a random suffix, in the
// characters Kafka allows in topic and group names.
func UniqueName(t testing.TB, prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := unsafeName.ReplaceAllString(t.Name(), "_")
	if len(name) > 150 {
		name = name[:150]
	}
	return prefix + "." + name + "." + hex.EncodeToString(b[:])
}

func newReal(t testing.TB, brokers []string, partitions int32) *Cluster {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), topicReadyTimeout)
	defer cancel()
	meta, err := adm.BrokerMetadata(ctx)
	require.NoError(t, err, "kafkatest: read brokers of %s=%s", BrokersEnv, strings.Join(brokers, ","))
	rf := int16(min(ReplicationDefault, len(meta.Brokers)))
	name := UniqueName(t, "hookyard.test")
	resp, err := adm.CreateTopic(ctx, partitions, rf, nil, name)
	require.NoError(t, errors.Join(err, resp.Err), "kafkatest: create topic %s", name)
	changes := UniqueName(t, "hookyard.changes")
	resp, err = adm.CreateTopic(ctx, partitions, rf, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, changes)
	require.NoError(t, errors.Join(err, resp.Err), "kafkatest: create topic %s", changes)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// A failed delete only leaves a topic on a throw-away cluster.
		_, _ = adm.DeleteTopics(ctx, name, changes)
		cl.Close()
	})
	var ids []int32
	for _, b := range meta.Brokers {
		ids = append(ids, b.NodeID)
	}
	require.NoError(t, waitLeaders(ctx, cl, ids, name, int(partitions)), "kafkatest: topic %s", name)
	require.NoError(t, waitLeaders(ctx, cl, ids, changes, int(partitions)), "kafkatest: topic %s", changes)
	return &Cluster{Brokers: brokers, Topic: name, ChangesTopic: changes, Group: UniqueName(t, "test-processors")}
}

// waitLeaders waits until every broker's metadata has a leader for every
// partition of topic. A real cluster spreads a new topic's metadata to its
// brokers one by one: a client that asks another broker than the one that
// answered the create may still hear UNKNOWN_TOPIC_OR_PARTITION.
func waitLeaders(ctx context.Context, cl *kgo.Client, brokers []int32, topic string, partitions int) error {
	for {
		ready := true
		for _, id := range brokers {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
			if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != partitions {
				ready = false
				break
			}
			for _, p := range resp.Topics[0].Partitions {
				if p.ErrorCode != 0 || p.Leader < 0 {
					ready = false
				}
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("partition leaders on every broker: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
