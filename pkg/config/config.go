// Package config reads hookyard's YAML config and the environment variables
// of the contract. ${VAR} and ${VAR:-default} in the file are expanded from
// the environment, so secrets never need to live in the file.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hookyard/hookyard/pkg/access"
	"github.com/hookyard/hookyard/pkg/db"
	"github.com/hookyard/hookyard/pkg/provider"
)

// Defaults of the environment.
const (
	HTTPAddrDefault      = "127.0.0.1:8080"
	OpsAddrDefault       = "127.0.0.1:8081"
	KafkaAddrDefault     = "127.0.0.1:9092"
	StripeAPIBaseDefault = "https://api.stripe.com"
	OpsTokenDevDefault   = "hookyard-dev-token"
	TopicDefault         = "hookyard.events"
	PartitionsDefault    = 12
)

// Config is the whole configuration.
type Config struct {
	Endpoints []provider.Endpoint `yaml:"endpoints"`
	Kafka     Kafka               `yaml:"kafka"`
	Access    access.Policy       `yaml:"access"`
	Processor Processor           `yaml:"processor"`
	Receiver  Receiver            `yaml:"receiver"`
	Reconcile Reconcile           `yaml:"reconciler"`
	Relay     Relay               `yaml:"relay"`
	Retention Retention           `yaml:"retention"`

	// From the environment.
	DatabaseURL   string `yaml:"-"`
	HTTPAddr      string `yaml:"-"`
	OpsAddr       string `yaml:"-"`
	MetricsAddr   string `yaml:"-"`
	OpsToken      string `yaml:"-"`
	StripeAPIBase string `yaml:"-"`
	StripeAPIKey  string `yaml:"-"`
	// KafkaBrokers is empty when KAFKA_BROKERS is unset (dev embeds a broker).
	KafkaBrokers []string `yaml:"-"`
}

// Kafka configures the topic.
type Kafka struct {
	// Topic defaults to TopicDefault.
	Topic string `yaml:"topic"`
	// Partitions is used when the topic is created. Defaults to PartitionsDefault.
	Partitions int32 `yaml:"partitions"`
	// Replication is used when the topic is created. Defaults to 1.
	Replication int16 `yaml:"replication"`
	// Group is the processor consumer group. Defaults to "hookyard-processor".
	Group string `yaml:"group"`
}

// Processor options; zero values take the processor's defaults.
type Processor struct {
	// RetryWindow is how long a failing event is retried from its first
	// failure before it is dead (a dead hint marks its projection
	// needs_reconcile). Defaults to 72h (processor.RetryWindowDefault).
	RetryWindow time.Duration `yaml:"retry_window"`
	// MaxAttempts optionally also ends retries after that many attempts
	// that reached the provider. Before retry_window existed it was the only
	// limit; configs that still set it keep it as a cap. Defaults to 0: no
	// cap, the window alone decides.
	MaxAttempts int `yaml:"max_attempts"`
	// BackoffBase is the first retry's delay. Defaults to 2s.
	BackoffBase time.Duration `yaml:"backoff_base"`
	// BackoffMax caps the delay between retries. Defaults to 10m.
	BackoffMax time.Duration `yaml:"backoff_max"`
	// PartitionCheckInterval is how often a running processor compares the
	// topic's partition count with the fenced one. Defaults to 30s.
	PartitionCheckInterval time.Duration `yaml:"partition_check_interval"`
}

// Receiver options.
type Receiver struct {
	BodyLimit     int64         `yaml:"body_limit"`
	CommitTimeout time.Duration `yaml:"commit_timeout"`
	// CommitWorkers is how many group-commit statements run at once.
	CommitWorkers int `yaml:"commit_workers"`
	// MaxBatch caps the events coalesced into one statement.
	MaxBatch int `yaml:"max_batch"`
}

// Relay options; zero values take the relay's defaults.
type Relay struct {
	BatchSize      int           `yaml:"batch_size"`
	InFlight       int           `yaml:"in_flight"`
	PollInterval   time.Duration `yaml:"poll_interval"`
	ProduceTimeout time.Duration `yaml:"produce_timeout"`
}

// Retention options.
type Retention struct {
	// PayloadAge: finished events (processed, ignored) received longer ago
	// lose their payload; identity, status and decision stay. The
	// reconciler purges every round. Zero keeps payloads forever.
	PayloadAge time.Duration `yaml:"payload_age"`
}

// Reconcile options.
type Reconcile struct {
	Interval   time.Duration `yaml:"interval"`
	StaleAfter time.Duration `yaml:"stale_after"`
}

// Load reads path and the environment.
func Load(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(raw, os.LookupEnv)
}

// Parse reads a config document, expanding variables with lookup.
func Parse(raw []byte, lookup func(string) (string, bool)) (*Config, error) {
	expanded := os.Expand(string(raw), func(v string) string {
		name, def, hasDef := strings.Cut(v, ":-")
		if val, ok := lookup(name); ok && val != "" {
			return val
		}
		if hasDef {
			return def
		}
		return ""
	})
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(expanded))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	env := func(k, def string) string {
		if v, ok := lookup(k); ok && v != "" {
			return v
		}
		return def
	}
	c.DatabaseURL = env("DATABASE_URL", db.DefaultURL)
	c.HTTPAddr = env("HTTP_ADDR", HTTPAddrDefault)
	c.OpsAddr = env("OPS_ADDR", OpsAddrDefault)
	c.MetricsAddr = env("METRICS_ADDR", "127.0.0.1:9100")
	c.OpsToken = env("OPS_TOKEN", OpsTokenDevDefault)
	c.StripeAPIBase = env("STRIPE_API_BASE", "")
	c.StripeAPIKey = env("STRIPE_API_KEY", "sk_test_hookyard_dev")
	if b := env("KAFKA_BROKERS", ""); b != "" {
		for _, s := range strings.Split(b, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.KafkaBrokers = append(c.KafkaBrokers, s)
			}
		}
	}
	c.Kafka.Topic = cmp.Or(c.Kafka.Topic, TopicDefault)
	c.Kafka.Partitions = cmp.Or(c.Kafka.Partitions, PartitionsDefault)
	c.Kafka.Replication = cmp.Or(c.Kafka.Replication, 1)
	c.Kafka.Group = cmp.Or(c.Kafka.Group, "hookyard-processor")
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) validate() error {
	seen := map[string]bool{}
	var errs []error
	for i, ep := range c.Endpoints {
		where := fmt.Sprintf("endpoints[%d]", i)
		switch {
		case ep.ID == "":
			errs = append(errs, fmt.Errorf("config: %s.id is required", where))
		case seen[ep.ID]:
			errs = append(errs, fmt.Errorf("config: %s.id %q is defined twice", where, ep.ID))
		}
		seen[ep.ID] = true
		switch ep.Provider {
		case provider.Stripe, provider.Chargebee, provider.GitHub, provider.StandardWebhooks:
		default:
			errs = append(errs, fmt.Errorf("config: %s.provider %q is not one of stripe, chargebee, github, standard-webhooks", where, ep.Provider))
		}
		if ep.SourceAccount == "" {
			errs = append(errs, fmt.Errorf("config: %s.source_account is required", where))
		}
		if ep.Environment == "" {
			errs = append(errs, fmt.Errorf("config: %s.environment is required", where))
		}
		if len(ep.Secrets) == 0 {
			errs = append(errs, fmt.Errorf("config: %s.secrets needs at least one secret", where))
		}
		for j, s := range ep.Secrets {
			if s == "" || s == ":" {
				errs = append(errs, fmt.Errorf("config: %s.secrets[%d] is empty (is its environment variable set?)", where, j))
			}
		}
	}
	if c.Relay.BatchSize < 0 || c.Relay.InFlight < 0 || c.Relay.PollInterval < 0 || c.Relay.ProduceTimeout < 0 {
		errs = append(errs, errors.New("config: relay settings must not be negative"))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"processor.retry_window", c.Processor.RetryWindow}, {"processor.backoff_base", c.Processor.BackoffBase},
		{"processor.backoff_max", c.Processor.BackoffMax}, {"processor.partition_check_interval", c.Processor.PartitionCheckInterval}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("config: %s must not be negative", f.name))
		}
	}
	if c.Processor.MaxAttempts < 0 {
		errs = append(errs, errors.New("config: processor.max_attempts must not be negative (0: no cap)"))
	}
	if c.Retention.PayloadAge < 0 {
		errs = append(errs, errors.New("config: retention.payload_age must not be negative (0 keeps payloads forever)"))
	}
	return errors.Join(errs...)
}

// StripeBase returns the Stripe API base URL, or def when STRIPE_API_BASE is unset.
func (c *Config) StripeBase(def string) string { return cmp.Or(c.StripeAPIBase, def) }
