package processor

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
)

// Defaults of Config.
const (
	TopicDefault = "hookyard.events"
	GroupDefault = "hookyard-processor"
	// RetryWindowDefault is Stripe's own retry horizon for webhooks: a
	// provider incident shorter than that never needs an operator.
	RetryWindowDefault   = 72 * time.Hour
	BackoffBaseDefault   = 2 * time.Second
	BackoffMaxDefault    = 10 * time.Minute
	RevokeGraceDefault   = 10 * time.Second
	RetryIntervalDefault = time.Second
	// PartitionCheckIntervalDefault bounds how long a running processor
	// takes to notice that the topic's partition count changed.
	PartitionCheckIntervalDefault = 30 * time.Second
	// TopicWaitDefault is how long a starting processor waits for its
	// topic (or its brokers) to appear.
	TopicWaitDefault        = 2 * time.Minute
	MaxPollRecordsDefault   = 1000
	FetchConcurrencyDefault = 8
	// SessionTimeoutDefault is how long the group coordinator waits for a
	// silent member (killed, frozen, cut off) before it hands its
	// partitions to the others: a processor killed with -9 stalls its
	// partitions about this long. It is Kafka's default
	// group.min.session.timeout.ms, the lowest a stock broker accepts
	// (franz-go's own default is 45 s).
	SessionTimeoutDefault = 6 * time.Second
	// HeartbeatIntervalDefault keeps several heartbeats inside one session
	// timeout, so a single late one does not end the membership.
	HeartbeatIntervalDefault = time.Second
	// RebalanceTimeoutDefault bounds how long members may take to rejoin
	// once a rebalance began; it exceeds RevokeGraceDefault plus two offset
	// commits (the one in flight and the revoked partitions' own), so a
	// revoked worker's grace never gets the member kicked.
	RebalanceTimeoutDefault = 30 * time.Second
)

// commitTimeout bounds one offset commit request.
const commitTimeout = 5 * time.Second

// Config configures a processor.
type Config struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Topic is the events topic. Defaults to TopicDefault.
	Topic string
	// ChangesTopic is the compacted topic every projection change goes to:
	// each write that changed a projection queues its change record in the
	// outbox in the write's own transaction (the relay publishes it).
	// Defaults to none: no change records (the services set
	// kafka.changes_topic, whose default is "hookyard.changes").
	ChangesTopic string
	// Group is the consumer group. Defaults to GroupDefault.
	Group string
	// InstanceID names this processor in fences and logs. Defaults to
	// host-pid-random.
	InstanceID string
	// Endpoints are the configured endpoints; their options (incremental,
	// JSON paths) steer processing.
	Endpoints []provider.Endpoint
	// Fetchers read current state per provider name, for events without a
	// version. Defaults to none: such hints are recorded, not fetched.
	Fetchers map[string]provider.Fetcher
	// RetryWindow is how long a failing event is retried, from its first
	// failure (a replay starts a new window). An event still failing when
	// it ends is dead, and a dead hint marks its projection
	// needs_reconcile. Defaults to RetryWindowDefault.
	RetryWindow time.Duration
	// MaxAttempts, when above 0, also ends retries after that many
	// attempts that reached the provider (tries refused by the breaker or
	// the local rate limiter, ErrNotAttempted, do not count). Defaults to
	// 0: the window alone decides.
	MaxAttempts int
	// BackoffBase is the first retry's delay. Later delays grow with the
	// time the event has been failing (each about the time failed so far,
	// with jitter), so they double per try. Defaults to BackoffBaseDefault.
	BackoffBase time.Duration
	// BackoffMax caps the retry delay: after a long outage an event is
	// applied at most this long after the provider is back. Defaults to
	// BackoffMaxDefault.
	BackoffMax time.Duration
	// RevokeGrace bounds how long a revoked partition's worker may finish its
	// batch before the rebalance goes on without it; the fence keeps it from
	// writing afterwards. Defaults to RevokeGraceDefault.
	RevokeGrace time.Duration
	// RetryInterval is how often due retries are re-enqueued. Defaults to
	// RetryIntervalDefault.
	RetryInterval time.Duration
	// PartitionCheckInterval is how often the topic's partition count is
	// compared with the fenced one while the processor runs. Defaults to
	// PartitionCheckIntervalDefault.
	PartitionCheckInterval time.Duration
	// TopicWait is how long a starting processor waits for the topic to
	// exist and the brokers to answer: services are started in any order
	// (a Kubernetes rollout, docker compose), and the topic may be created
	// by another process a moment later. Meanwhile it is not ready; then it
	// fails with the last error. Defaults to TopicWaitDefault.
	TopicWait time.Duration
	// SessionTimeout is how long the group coordinator keeps a member that
	// stopped heartbeating; then its partitions go to the other members.
	// Lower means a killed or frozen processor's partitions resume sooner;
	// the price is that a live processor silent for longer (a long GC
	// pause, a stalled host, a network partition) loses its partitions
	// too. That is safe, not only slow: the member that takes a partition
	// bumps its fence, so the paused one cannot write when it wakes up
	// (invariant 6) and rejoins. It must lie within the broker's
	// group.min.session.timeout.ms and group.max.session.timeout.ms (6 s
	// and 30 min on a stock broker). Defaults to SessionTimeoutDefault.
	SessionTimeout time.Duration
	// HeartbeatInterval is how often the member heartbeats; at most a third
	// of SessionTimeout. Defaults to HeartbeatIntervalDefault.
	HeartbeatInterval time.Duration
	// RebalanceTimeout bounds how long members may take to rejoin once a
	// rebalance began (Kafka's rebalance.timeout.ms); it must exceed
	// RevokeGrace plus two offset commits. Defaults to RebalanceTimeoutDefault.
	RebalanceTimeout time.Duration
	// Facts declare which fields of a provider's object each fact type
	// keeps in fact.data (and so in every receipt); a type not declared
	// keeps none. Defaults to fact.Defaults; a declaration given here
	// replaces the default of its provider and type.
	Facts fact.Declarations
	// Effects declare the external effects recorded as actions: on a fact
	// (recorded with it) or on a projection transition (recorded in the
	// write's transaction once its outcome is known). Defaults to
	// action.DefaultEffects; a declared kind replaces the default of its
	// kind.
	Effects action.Effects
	// StateFields are the fields of a resource's state a projection keeps
	// beyond projection.DecisionFields (what access, explain and the
	// reconciler's compare read). Defaults to none.
	StateFields []string
	// MaxPollRecords caps one poll. Defaults to MaxPollRecordsDefault.
	MaxPollRecords int
	// FetchConcurrency bounds a worker's concurrent provider fetches for
	// distinct resources of one batch. Defaults to FetchConcurrencyDefault.
	FetchConcurrency int
	// Registerer receives the metrics. Defaults to a private registry.
	Registerer prometheus.Registerer
	// KafkaOptions are appended to the client's options (tests, TLS, SASL).
	KafkaOptions []kgo.Opt
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// WithDefaults returns cfg with defaults filled in.
func (c Config) WithDefaults() Config {
	c.Topic = cmp.Or(c.Topic, TopicDefault)
	c.Group = cmp.Or(c.Group, GroupDefault)
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		var b [3]byte
		_, _ = rand.Read(b[:])
		c.InstanceID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	c.RetryWindow = cmp.Or(c.RetryWindow, RetryWindowDefault)
	c.BackoffBase = cmp.Or(c.BackoffBase, BackoffBaseDefault)
	c.BackoffMax = cmp.Or(c.BackoffMax, BackoffMaxDefault)
	c.RevokeGrace = cmp.Or(c.RevokeGrace, RevokeGraceDefault)
	c.RetryInterval = cmp.Or(c.RetryInterval, RetryIntervalDefault)
	c.PartitionCheckInterval = cmp.Or(c.PartitionCheckInterval, PartitionCheckIntervalDefault)
	c.TopicWait = cmp.Or(c.TopicWait, TopicWaitDefault)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, SessionTimeoutDefault)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, HeartbeatIntervalDefault)
	c.RebalanceTimeout = cmp.Or(c.RebalanceTimeout, RebalanceTimeoutDefault)
	c.MaxPollRecords = cmp.Or(c.MaxPollRecords, MaxPollRecordsDefault)
	c.FetchConcurrency = cmp.Or(c.FetchConcurrency, FetchConcurrencyDefault)
	c.Facts = c.Facts.With(fact.Defaults)
	c.Effects = c.Effects.With(action.DefaultEffects)
	c.StateFields = projection.KeptFields(c.StateFields)
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("processor config: Brokers is required")
	}
	if err := c.Facts.Validate(); err != nil {
		return fmt.Errorf("processor config: %w", err)
	}
	if err := c.Effects.Validate(); err != nil {
		return fmt.Errorf("processor config: %w", err)
	}
	if c.MaxAttempts < 0 {
		return errors.New("processor config: MaxAttempts must not be negative (0: no cap, the retry window decides)")
	}
	if c.RetryWindow < 0 || c.BackoffBase < 0 || c.BackoffMax < 0 {
		return errors.New("processor config: RetryWindow, BackoffBase and BackoffMax must not be negative")
	}
	if c.HeartbeatInterval*3 > c.SessionTimeout {
		return fmt.Errorf("processor config: HeartbeatInterval (%s) must be at most a third of SessionTimeout (%s)", c.HeartbeatInterval, c.SessionTimeout)
	}
	// A revoke may take RevokeGrace, then wait for an offset commit in
	// flight and make its own.
	if c.RebalanceTimeout <= c.RevokeGrace+2*commitTimeout {
		return fmt.Errorf("processor config: RebalanceTimeout (%s) must exceed RevokeGrace (%s) plus two offset commits (%s)",
			c.RebalanceTimeout, c.RevokeGrace, 2*commitTimeout)
	}
	return nil
}
