package processor_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/fence"
	"github.com/hookyard/hookyard/processor"
)

// growTopic adds partitions to the test topic, as an admin tool or an
// autoscaler would while everything runs.
func growTopic(t *testing.T, brokers []string, topicName string, add int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreatePartitions(context.Background(), add, topicName)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
}

// createTopic creates a topic a test's processor waits for, as the process
// that owns the topic would, and deletes it when the test ends.
func createTopic(t *testing.T, brokers []string, name string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	adm := kadm.NewClient(cl)
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), name); cl.Close() })
	resp, err := adm.CreateTopic(context.Background(), partitions, -1, nil, name)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
}

// startProcessor starts a processor of its own until the test ends and
// returns its Run result, without waiting for it.
func startProcessor(t *testing.T, p *pipelinetest.Pipeline, cfg processor.Config) (*processor.Processor, <-chan error) {
	t.Helper()
	proc, err := processor.New(p.Pool, p.Log, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	return proc, done
}

// runProcessor runs a processor of its own and returns its Run result.
func runProcessor(t *testing.T, p *pipelinetest.Pipeline, cfg processor.Config) (*processor.Processor, <-chan error) {
	t.Helper()
	proc, done := startProcessor(t, p, cfg)
	select {
	case <-proc.Ready():
	case err := <-done:
		t.Fatalf("processor stopped before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("processor did not start")
	}
	return proc, done
}

func requireStopsOnCountChange(t *testing.T, proc *processor.Processor, reg *prometheus.Registry, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		require.ErrorIs(t, err, fence.ErrPartitionCountChanged)
	case <-time.After(30 * time.Second):
		t.Fatal("the processor kept taking work on a topic that grew under it")
	}
	require.ErrorIs(t, proc.Check(context.Background()), fence.ErrPartitionCountChanged, "readiness still says ready")
	require.Equal(t, 1.0, counterValue(t, reg, "hookyard_processor_partition_count_changed"))
}

// Partitions added while a processor runs move keys away from their
// backlog; the running processor notices on its periodic check and stops
// taking work (and says why). Fails if the count is compared only at start.
func TestProcessorStopsWhenTopicGrowsUnderIt(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{NoProcessor: true})
	reg := prometheus.NewRegistry()
	cfg := p.ProcessorConfig("grow-watch")
	cfg.Registerer, cfg.PartitionCheckInterval = reg, 100*time.Millisecond
	proc, done := runProcessor(t, p, cfg)

	growTopic(t, p.Kafka.Brokers, p.Kafka.Topic, 2)
	requireStopsOnCountChange(t, proc, reg, done)
}

// A processor assigned a partition at or above the fenced count (the group
// leader saw the new partitions before any periodic check did) takes no
// fence for it and stops. Fails if the assignment takes a fence and starts
// a worker on the new partition.
func TestProcessorAssignedPartitionBeyondFencedCountStops(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{NoProcessor: true})
	reg := prometheus.NewRegistry()
	cfg := p.ProcessorConfig("grow-assign")
	cfg.Registerer, cfg.PartitionCheckInterval = reg, time.Hour
	// The leader refreshes metadata often, so it assigns new partitions soon.
	cfg.KafkaOptions = append(cfg.KafkaOptions, kgo.MetadataMaxAge(200*time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond))
	proc, done := runProcessor(t, p, cfg)

	growTopic(t, p.Kafka.Brokers, p.Kafka.Topic, 2)
	requireStopsOnCountChange(t, proc, reg, done)
	var fences int
	require.NoError(t, p.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM partition_fence WHERE topic = $1 AND partition >= 4`, p.Kafka.Topic).Scan(&fences))
	require.Zero(t, fences, "a fence was taken on a partition the fenced count does not know")
}

// Services start in any order: a processor started before the process that
// creates its topic waits for the topic (not ready meanwhile) and starts
// once it exists, with the topic's real partition count fenced; with no
// topic at all it gives up after TopicWait and names the topic. Fails if
// the processor reads the topic once at start.
func TestProcessorStartedBeforeItsTopicWaitsForIt(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{NoProcessor: true})
	late := kafkatest.UniqueName(t, "hookyard.late")
	cfg := p.ProcessorConfig("early")
	cfg.Topic = late
	cfg.Registerer = prometheus.NewRegistry()
	proc, done := startProcessor(t, p, cfg)
	select {
	case err := <-done:
		t.Fatalf("processor ended before its topic existed: %v", err)
	case <-proc.Ready():
		t.Fatal("processor ready without its topic")
	case <-time.After(1500 * time.Millisecond):
	}

	createTopic(t, p.Kafka.Brokers, late, 3)
	select {
	case err := <-done:
		t.Fatalf("processor ended after its topic was created: %v", err)
	case <-proc.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("processor never started after its topic was created")
	}
	var recorded int
	require.NoError(t, p.Pool.QueryRow(context.Background(), `SELECT partition_count FROM topic_fence WHERE topic = $1`, late).Scan(&recorded))
	require.Equal(t, 3, recorded)

	cfg.Topic = kafkatest.UniqueName(t, "hookyard.never")
	cfg.TopicWait = 500 * time.Millisecond
	cfg.Registerer = prometheus.NewRegistry()
	never, err := processor.New(p.Pool, p.Log, cfg)
	require.NoError(t, err)
	err = never.Run(t.Context())
	require.Error(t, err)
	require.Contains(t, err.Error(), cfg.Topic)
}
