package outboxrelay

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults of Config.
const (
	BatchSizeDefault      = 2000
	InFlightDefault       = 4
	PollIntervalDefault   = time.Second
	ProduceTimeoutDefault = 30 * time.Second
	MaxBackoffDefault     = 5 * time.Second
	// PartitionCheckIntervalDefault bounds how long a relay keeps
	// publishing after the topic's partition count changed.
	PartitionCheckIntervalDefault = 10 * time.Second
	// TopicWaitDefault is how long a starting relay waits for its brokers
	// to answer and its topic to exist, as a processor does.
	TopicWaitDefault = 2 * time.Minute
	// VacuumDeadRowsDefault is how many dead rows the outbox may hold
	// before the relay vacuums it (see vacuum.go). A vacuum without truncation
	// of a queue this size takes a few milliseconds.
	VacuumDeadRowsDefault = 5_000
	// VacuumCheckIntervalDefault is how often the relay reads them.
	VacuumCheckIntervalDefault = time.Second
	// ShutdownGrace is how long a stopping relay waits for the broker to
	// answer records already sent to it.
	ShutdownGrace = 5 * time.Second
)

// Config configures a relay.
type Config struct {
	// Brokers are the Kafka seed brokers. Required unless Publisher is set.
	Brokers []string
	// Topic is the events topic, where rows that name no topic of their own
	// go. Required unless Publisher is set.
	Topic string
	// ChangesTopic is the compacted topic of projection changes. Rows name
	// their topic themselves, so the relay only needs it to create the topic
	// (compacted, with TopicPartitions partitions) when it creates the events
	// topic. Defaults to none: nothing is created, change rows still go to
	// the topic they name.
	ChangesTopic string
	// BatchSize caps the rows claimed per transaction. Defaults to BatchSizeDefault.
	BatchSize int
	// InFlight caps the batches awaiting the broker's acknowledgement; each
	// holds one pool connection. Defaults to InFlightDefault.
	InFlight int
	// PollInterval is how long an idle relay waits for a notification
	// before it looks at the outbox anyway. Defaults to PollIntervalDefault.
	PollInterval time.Duration
	// ProduceTimeout bounds one batch's wait for the broker: the producer
	// gives up on a record after it, and the batch is rolled back and
	// retried. At least 1s; defaults to ProduceTimeoutDefault.
	ProduceTimeout time.Duration
	// ClaimTimeout is how long Postgres lets a claim's transaction sit idle
	// (idle_in_transaction_session_timeout) before it ends the session and
	// releases the rows: a frozen relay cannot hold them forever. Defaults to
	// ProduceTimeout plus 30s.
	ClaimTimeout time.Duration
	// MaxBackoff caps the pause after failed batches. Defaults to MaxBackoffDefault.
	MaxBackoff time.Duration
	// PartitionCheckInterval is how often the relay compares the topic's
	// partition count with the one the processors' fences recorded
	// (topic_fence); while they differ it publishes nothing. Defaults to
	// PartitionCheckIntervalDefault.
	PartitionCheckInterval time.Duration
	// TopicWait is how long a starting relay waits for the brokers to answer
	// and the topic to exist (creating it when TopicPartitions is set):
	// services start in any order (docker compose, a Kubernetes rollout).
	// Meanwhile it is not ready and rows wait in the outbox; then Run fails
	// with the last error. Defaults to TopicWaitDefault.
	TopicWait time.Duration
	// TopicPartitions, when above 0, makes the relay create the topic with
	// that many partitions (and TopicReplication replicas, -1 for the
	// broker's default) when it is missing. Defaults to 0: the relay waits
	// for another process to create it.
	TopicPartitions  int32
	TopicReplication int16
	// VacuumDeadRows is how many dead rows (deleted, published rows whose
	// index entries every claim still walks) the outbox may hold before the
	// relay vacuums it; negative: never (autovacuum alone). Defaults to
	// VacuumDeadRowsDefault.
	VacuumDeadRows int
	// VacuumCheckInterval is how often the relay reads the outbox's dead
	// rows. Defaults to VacuumCheckIntervalDefault.
	VacuumCheckInterval time.Duration
	// NoListen turns LISTEN/NOTIFY off; the relay only polls.
	NoListen bool
	// Registerer receives the metrics. Defaults to a private registry.
	Registerer prometheus.Registerer
	// KafkaOptions are appended to the producer's options.
	KafkaOptions []kgo.Opt
	// Publisher replaces the Kafka producer (the bench measures Postgres
	// alone with one that acknowledges at once).
	Publisher Publisher
}

// Publisher hands records to the broker; done is called once per record,
// from any goroutine, when the broker acknowledged it or gave up on it.
type Publisher interface {
	Publish(ctx context.Context, r *kgo.Record, done func(*kgo.Record, error))
}

// WithDefaults returns cfg with defaults filled in.
func (c Config) WithDefaults() Config {
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.InFlight = cmp.Or(c.InFlight, InFlightDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.ProduceTimeout = max(cmp.Or(c.ProduceTimeout, ProduceTimeoutDefault), time.Second) // the client's minimum
	c.MaxBackoff = cmp.Or(c.MaxBackoff, MaxBackoffDefault)
	c.PartitionCheckInterval = cmp.Or(c.PartitionCheckInterval, PartitionCheckIntervalDefault)
	c.ClaimTimeout = cmp.Or(c.ClaimTimeout, c.ProduceTimeout+30*time.Second)
	c.TopicWait = cmp.Or(c.TopicWait, TopicWaitDefault)
	c.VacuumDeadRows = cmp.Or(c.VacuumDeadRows, VacuumDeadRowsDefault)
	c.VacuumCheckInterval = cmp.Or(c.VacuumCheckInterval, VacuumCheckIntervalDefault)
	c.TopicReplication = cmp.Or(c.TopicReplication, -1)
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Publisher == nil && len(c.Brokers) == 0:
		return errors.New("outbox relay config: Brokers is required")
	case c.Publisher == nil && c.Topic == "":
		return errors.New("outbox relay config: Topic is required")
	case c.BatchSize < 1 || c.InFlight < 1:
		return errors.New("outbox relay config: BatchSize and InFlight must be positive")
	}
	return nil
}
