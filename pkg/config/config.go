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
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/db"
	"github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/registry"
	"github.com/hookyard/hookyard/pkg/subscriber"
)

// Defaults of the environment.
const (
	HTTPAddrDefault      = "127.0.0.1:8080"
	OpsAddrDefault       = "127.0.0.1:8081"
	KafkaAddrDefault     = "127.0.0.1:9092"
	StripeAPIBaseDefault = "https://api.stripe.com"
	OpsTokenDevDefault   = "hookyard-dev-token"
	// StripeAPIKeyDevDefault is STRIPE_API_KEY when unset in `hookyard dev`
	// (ApplyDevDefaults): the test-mode key its simulator accepts
	// (stripesim.DevAPIKey). Real Stripe answers it 401, so no other
	// command has a default: a Stripe endpoint without a key refuses to
	// start instead of failing every fetch.
	StripeAPIKeyDevDefault = "sk_test_hookyard_dev"
	TopicDefault           = "hookyard.events"
	// ChangesTopicDefault is the compacted topic of projection changes.
	ChangesTopicDefault = "hookyard.changes"
	PartitionsDefault   = 12
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
	Effects   Effects             `yaml:"effects"`
	Changes   Changes             `yaml:"changes"`
	Ops       Ops                 `yaml:"ops"`
	// Facts declare the fields each fact type keeps (fact.Declaration).
	// Defaults to fact.Defaults; an entry replaces the default of its
	// provider and type.
	Facts      fact.Declarations `yaml:"facts"`
	Projection Projection        `yaml:"projection"`

	// From the environment.
	DatabaseURL   string `yaml:"-"`
	HTTPAddr      string `yaml:"-"`
	OpsAddr       string `yaml:"-"`
	MetricsAddr   string `yaml:"-"`
	OpsToken      string `yaml:"-"`
	StripeAPIBase string `yaml:"-"`
	// GitHubAPIBase (GITHUB_API_BASE) is the GitHub API root the
	// reconciler lists hook deliveries at. Defaults to empty: GitHub's
	// (`hookyard dev`: its simulator).
	GitHubAPIBase string `yaml:"-"`
	// StripeAPIKey (STRIPE_API_KEY) is the API key of every Stripe endpoint
	// that names no api_key of its own, as before endpoints could name one.
	// Defaults to none; `hookyard dev` to StripeAPIKeyDevDefault
	// (ApplyDevDefaults).
	StripeAPIKey string `yaml:"-"`
	// KafkaBrokers is empty when KAFKA_BROKERS is unset (dev embeds a broker).
	KafkaBrokers []string `yaml:"-"`
}

// Kafka configures the topic.
type Kafka struct {
	// Topic defaults to TopicDefault.
	Topic string `yaml:"topic"`
	// ChangesTopic is the compacted topic (cleanup.policy=compact) every
	// applied projection change is published to, under the resource's key;
	// created with Partitions and Replication like Topic. Defaults to
	// ChangesTopicDefault.
	ChangesTopic string `yaml:"changes_topic"`
	// Partitions is used when the topic is created. Defaults to PartitionsDefault.
	Partitions int32 `yaml:"partitions"`
	// Replication is used when the topic is created. Defaults to -1: the
	// cluster's default.replication.factor, so a three-broker cluster set up
	// for durability is not handed single-copy partitions.
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
	// SessionTimeout is how long the Kafka group keeps a silent processor
	// (killed, frozen) before its partitions move to the others. Lower
	// resumes them sooner; a processor silent for longer (GC pause, stalled
	// host) loses them too, safely, since fencing keeps it from writing.
	// Defaults to 6s (processor.SessionTimeoutDefault, a stock broker's minimum).
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// HeartbeatInterval is at most a third of session_timeout. Defaults to 1s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// RebalanceTimeout bounds a rebalance's rejoin. It must exceed what a
	// revoke may take: the revoked workers' grace (10s) plus two offset
	// commits (5s each). Defaults to 30s.
	RebalanceTimeout time.Duration `yaml:"rebalance_timeout"`
}

// Projection options.
type Projection struct {
	// StateFields are the fields of a resource's state a projection keeps
	// (dotted paths) beyond projection.DecisionFields, the ones access,
	// explain and the reconciler read. Defaults to none: the rest of what a
	// provider sends (a customer's e-mail, name, address) is not stored.
	StateFields []string `yaml:"state_fields"`
}

// Receiver options.
type Receiver struct {
	// BodyLimit caps a delivery (bytes) unless its endpoint sets its own.
	// Defaults to 1 MiB (25 MiB for GitHub endpoints).
	BodyLimit int64 `yaml:"body_limit"`
	// CommitTimeout bounds the wait for Postgres before a 503. Defaults to 5s.
	CommitTimeout time.Duration `yaml:"commit_timeout"`
	// ReadTimeout bounds the time a client has to send headers and body.
	// Defaults to 10s, GitHub's own delivery deadline.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// MaxConnections caps open connections; idle keep-alive connections
	// are closed before the cap is reached. Defaults to 1024.
	MaxConnections int `yaml:"max_connections"`
	// ConnsPerClient caps the connections one client address may hold.
	// Behind a load balancer (every connection from its address) set it to
	// max_connections. Defaults to a quarter of max_connections.
	ConnsPerClient int `yaml:"conns_per_client"`
	// FirstByteTimeout bounds the wait for a body's first byte after the
	// headers (then 408). Defaults to 2s.
	FirstByteTimeout time.Duration `yaml:"first_byte_timeout"`
	// BodyBytes caps the bytes of bodies being read at once. Defaults to 64 MiB.
	BodyBytes int64 `yaml:"body_bytes"`
	// CommitWorkers is how many group-commit statements run at once.
	CommitWorkers int `yaml:"commit_workers"`
	// MaxBatch caps the events coalesced into one statement.
	MaxBatch int `yaml:"max_batch"`
	// MemoryLimit is the memory (bytes) the receiver may use, as a
	// container limit: `hookyard receiver` sets the Go runtime's soft
	// limit to 85% of it unless GOMEMLIMIT is set. Defaults to the
	// cgroup's memory limit (v2 memory.max, v1 memory.limit_in_bytes),
	// else none.
	MemoryLimit int64 `yaml:"memory_limit"`
}

// Relay options; zero values take the relay's defaults.
type Relay struct {
	BatchSize      int           `yaml:"batch_size"`
	InFlight       int           `yaml:"in_flight"`
	PollInterval   time.Duration `yaml:"poll_interval"`
	ProduceTimeout time.Duration `yaml:"produce_timeout"`
}

// Effects configures the external-effects sender (package effects). Zero
// values take the sender's defaults.
type Effects struct {
	// ReceiptURL is where the receipt of a paid invoice is POSTed, with
	// header Idempotency-Key; RECEIPT_WEBHOOK_URL overrides it. An absolute
	// http(s) URL; outside `hookyard dev` it must be https or on loopback
	// unless AllowHTTP. Defaults to none: receipts stay pending (explain
	// says why).
	ReceiptURL string `yaml:"receipt_url"`
	// AllowHTTP lets a plain http ReceiptURL to another host through outside
	// `hookyard dev` (a service mesh that encrypts in a sidecar). Defaults
	// to false.
	AllowHTTP bool `yaml:"allow_http"`
	// Timeout bounds one attempt. Defaults to 10s (effects.TimeoutDefault).
	Timeout time.Duration `yaml:"timeout"`
	// BatchSize caps the actions claimed and sent at once. Defaults to 16.
	BatchSize int `yaml:"batch_size"`
	// PollInterval is how often an idle sender looks for due actions.
	// Defaults to 1s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// BackoffBase is the delay after the first failed attempt, doubled per
	// attempt with jitter. Defaults to 2s.
	BackoffBase time.Duration `yaml:"backoff_base"`
	// BackoffMax caps the delay. Defaults to 1h.
	BackoffMax time.Duration `yaml:"backoff_max"`
	// MaxAttempts is how many attempts an action gets (again after each
	// replay) before it is dead. Defaults to 20 (about 5 to 9 hours).
	MaxAttempts int `yaml:"max_attempts"`
	// Declare are the declared effects (action.Effect): a kind, what
	// causes it (on_fact: a fact type, or on: a projection transition) and
	// its url (or url_env). Defaults to action.DefaultEffects: the receipt
	// on invoice_paid, POSTed to receipt_url; an entry replaces the default
	// of its kind.
	Declare action.Effects `yaml:"declare"`
}

// Changes configures what leaves the changes topic besides Kafka.
type Changes struct {
	// Publish: every applied change of a projection is written, in the
	// projection's own statement, to the outbox and published to
	// kafka.changes_topic. false turns the change stream off (no change
	// record is written or published, the changes topic is not created,
	// and subscribers are refused): a deployment whose teams do not read
	// the stream saves a row per applied change (about a third of
	// Postgres's work per event). Defaults to true.
	Publish *bool `yaml:"publish"`
	// Subscribers receive every change they take as a Standard Webhooks
	// POST, signed with their key (subscriber.Subscriber: name, url or
	// url_env, secret_env, types, accounts), through the effects sender:
	// one action per change and subscriber, in order per resource. Plain
	// http to another host than loopback is refused outside `hookyard dev`
	// unless effects.allow_http. Defaults to none.
	Subscribers subscriber.Subscribers `yaml:"subscribers"`
}

// Retention options.
type Retention struct {
	// PayloadAge: finished events (processed, ignored) received longer ago
	// lose their payload; identity, status and decision stay. The
	// reconciler purges every round. Zero keeps payloads forever.
	PayloadAge time.Duration `yaml:"payload_age"`
	// MinPurgeAge is the floor under every purge: a purge of payloads
	// received more recently (`purge -older-than`, POST /v1/purge, and
	// payload_age itself) is refused, so a typo (1ns, 1m) cannot drop what
	// recovery still needs. Defaults to MinPurgeAgeDefault.
	MinPurgeAge time.Duration `yaml:"min_purge_age"`
	// AuditAge is how long ops_audit keeps its records; older ones go with
	// the reconciler's purge step and purge jobs. Defaults to
	// AuditAgeDefault.
	AuditAge time.Duration `yaml:"audit_age"`
	// PartitionInterval is the width of a time partition of
	// webhook_inbox_body, a whole number of minutes, at least 1m. Bodies go
	// a whole partition at a time once its range ended payload_age ago.
	// Defaults to PartitionIntervalDefault.
	PartitionInterval time.Duration `yaml:"partition_interval"`
	// DeadPayloadAge: dead and retrying events keep their body this long
	// after they were received (moved out of a partition that is dropped),
	// then lose it as finished events do; identity, status and reason stay.
	// Defaults to DeadPayloadAgeDefault.
	DeadPayloadAge time.Duration `yaml:"dead_payload_age"`
	// IdentityAge: finished events' identities (ledger rows) are forgotten
	// this long after they were received, dead ones after the longer of
	// this and dead_payload_age. A redelivery after that is taken as new, so
	// it must be longer than any provider redelivers or lists events (Stripe
	// retries for 3 days and lists 30 days of events, GitHub redelivers for
	// 3 days); below IdentityAgeMin every service but `hookyard dev` refuses
	// to start. Defaults to
	// IdentityAgeDefault.
	IdentityAge time.Duration `yaml:"identity_age"`
	// HistoryAge: projection_history partitions (partition_interval wide)
	// whose range ended this long ago are dropped. Defaults to
	// HistoryAgeDefault.
	HistoryAge time.Duration `yaml:"history_age"`
	// DeliveryAge: the subscribers' deliveries (changes.subscribers'
	// actions, with the change record each carries) sent or skipped this
	// long ago are deleted by the retention pass, except while a later
	// delivery of their resource is unsettled. A change record the feeder
	// reads again after its delivery is deleted is delivered again, so it
	// must be longer than the feeder's group can rewind (Kafka forgets an
	// empty group's offsets after offsets.retention.minutes, 7 days by
	// default; the group then reads the compacted topic from its start);
	// below DeliveryAgeMin every service but `hookyard dev` refuses to
	// start. Defaults to DeliveryAgeDefault.
	DeliveryAge time.Duration `yaml:"delivery_age"`
}

// Defaults of Retention.
const (
	MinPurgeAgeDefault       = time.Hour
	AuditAgeDefault          = 400 * 24 * time.Hour
	PartitionIntervalDefault = 24 * time.Hour
	DeadPayloadAgeDefault    = 14 * 24 * time.Hour
	HistoryAgeDefault        = 90 * 24 * time.Hour
	DeliveryAgeDefault       = 30 * 24 * time.Hour
	// DeliveryAgeMin is the floor of a non-zero delivery_age: Kafka's
	// default offsets.retention.minutes (7 days) and a day of margin.
	DeliveryAgeMin = 8 * 24 * time.Hour
	// IdentityAgeDefault outlasts Stripe's 30 days of listed events (the
	// reconciler's backfill reads them) with margin.
	IdentityAgeDefault = 35 * 24 * time.Hour
	// IdentityAgeMin is the floor of identity_age: longer than any
	// provider's automatic redelivery (3 days) with a day of margin.
	IdentityAgeMin = 4 * 24 * time.Hour
)

// Reconcile options; zero values take the reconciler's defaults.
type Reconcile struct {
	// Interval between rounds. Defaults to 5m (`hookyard dev`: at most 30s).
	Interval time.Duration `yaml:"interval"`
	// StaleAfter re-checks projections not observed for this long.
	// Defaults to 24h.
	StaleAfter time.Duration `yaml:"stale_after"`
	// Overlap: an events or deliveries walk starts this long before the
	// newest event the last complete walk saw. Defaults to 10m.
	Overlap time.Duration `yaml:"overlap"`
	// Backfill: a source's first events or deliveries walk reaches this
	// far back (what the provider still lists: Stripe 30 days of events,
	// GitHub 3 days of deliveries). Defaults to 0: the overlap.
	Backfill time.Duration `yaml:"backfill"`
	// PageSize is the page size of every listing (at most 100, the
	// providers' limit). Defaults to 100.
	PageSize int `yaml:"page_size"`
	// StripeRate is the calls per second the reconciler may take from each
	// Stripe account's quota (shared with the processor's fetches, whose
	// rate is 50/s). Defaults to a fifth of it (10/s), so live hints keep at
	// least four fifths.
	StripeRate float64 `yaml:"stripe_rate"`
	// ChargebeeRate is the calls per second per Chargebee site. Defaults
	// to 1 (Chargebee allows a test site 150 per minute).
	ChargebeeRate float64 `yaml:"chargebee_rate"`
	// GitHubRate is the calls per second per GitHub hook token. Defaults
	// to 0.5 (GitHub allows 5,000 per hour).
	GitHubRate float64 `yaml:"github_rate"`
}

// Load reads path and the environment for every part of hookyard at once
// (`hookyard dev`, the ops commands): every secret the config names must be
// set.
func Load(path string) (*Config, error) { return LoadService(path, "") }

// LoadService reads path and the environment for the one service that is
// starting (the subcommand: receiver, processor, api, migrate, ...): only
// the secrets that service reads must be set (see CheckService). "" or an
// unknown name reads everything, as Load.
func LoadService(path, service string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return ParseService(raw, os.LookupEnv, service)
}

// Parse reads a config document for every part of hookyard at once,
// expanding variables with lookup.
//
// A value can come from a file, the convention of Docker and Kubernetes
// secrets: ${file:/run/secrets/x} reads that file, and ${VAR} with VAR unset
// reads the file named by VAR_FILE. A trailing newline is dropped.
func Parse(raw []byte, lookup func(string) (string, bool)) (*Config, error) {
	return ParseService(raw, lookup, "")
}

// ParseService is Parse for one service: an endpoint secret that service
// never reads (a processor's webhook secrets) may be unset, so that a
// deployment gives each service only its own secrets.
func ParseService(raw []byte, lookup func(string) (string, bool), service string) (*Config, error) {
	var fileErrs []error
	expanded := os.Expand(string(raw), func(v string) string {
		if path, ok := strings.CutPrefix(v, "file:"); ok {
			val, err := readSecretFile(path)
			if err != nil {
				fileErrs = append(fileErrs, err)
			}
			return val
		}
		name, def, hasDef := strings.Cut(v, ":-")
		val, err := lookupOrFile(lookup, name)
		if err != nil {
			fileErrs = append(fileErrs, err)
		}
		if val != "" {
			return val
		}
		if hasDef {
			return def
		}
		return ""
	})
	if err := errors.Join(fileErrs...); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(expanded))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	var envErrs []error
	env := func(k, def string) string {
		v, err := lookupOrFile(lookup, k)
		if err != nil {
			envErrs = append(envErrs, err)
		}
		return cmp.Or(v, def)
	}
	c.DatabaseURL = env("DATABASE_URL", db.DefaultURL)
	c.HTTPAddr = env("HTTP_ADDR", HTTPAddrDefault)
	c.OpsAddr = env("OPS_ADDR", OpsAddrDefault)
	c.MetricsAddr = env("METRICS_ADDR", "127.0.0.1:9100")
	// No default: outside `hookyard dev` a service refuses to start without
	// a token of its own (CheckProduction); dev fills in OpsTokenDevDefault.
	c.OpsToken = env("OPS_TOKEN", "")
	c.StripeAPIBase = env("STRIPE_API_BASE", "")
	c.GitHubAPIBase = env("GITHUB_API_BASE", "")
	c.StripeAPIKey = env("STRIPE_API_KEY", "")
	c.Effects.ReceiptURL = env("RECEIPT_WEBHOOK_URL", c.Effects.ReceiptURL)
	for i := range c.Effects.Declare {
		if ef := &c.Effects.Declare[i]; ef.URLEnv != "" {
			ef.URL = env(ef.URLEnv, ef.URL)
		}
	}
	for i := range c.Changes.Subscribers {
		sub := &c.Changes.Subscribers[i]
		if sub.URLEnv != "" {
			sub.URL = env(sub.URLEnv, sub.URL)
		}
		if sub.SecretEnv != "" {
			sub.Secret = env(sub.SecretEnv, "")
		}
	}
	if b := env("KAFKA_BROKERS", ""); b != "" {
		for _, s := range strings.Split(b, ",") {
			if s = strings.TrimSpace(s); s != "" {
				c.KafkaBrokers = append(c.KafkaBrokers, s)
			}
		}
	}
	c.Kafka.Topic = cmp.Or(c.Kafka.Topic, TopicDefault)
	c.Kafka.ChangesTopic = cmp.Or(c.Kafka.ChangesTopic, ChangesTopicDefault)
	if !c.Changes.Publishing() {
		// Every component reads "no changes topic" as "no change stream".
		c.Kafka.ChangesTopic = ""
	}
	c.Kafka.Partitions = cmp.Or(c.Kafka.Partitions, PartitionsDefault)
	c.Kafka.Replication = cmp.Or(c.Kafka.Replication, -1)
	c.Kafka.Group = cmp.Or(c.Kafka.Group, "hookyard-processor")
	if c.Retention.MinPurgeAge == 0 {
		c.Retention.MinPurgeAge = MinPurgeAgeDefault
	}
	if c.Retention.AuditAge == 0 {
		c.Retention.AuditAge = AuditAgeDefault
	}
	if c.Retention.PartitionInterval == 0 {
		c.Retention.PartitionInterval = PartitionIntervalDefault
	}
	if c.Retention.DeadPayloadAge == 0 {
		c.Retention.DeadPayloadAge = DeadPayloadAgeDefault
	}
	if c.Retention.IdentityAge == 0 {
		c.Retention.IdentityAge = IdentityAgeDefault
	}
	if c.Retention.HistoryAge == 0 {
		c.Retention.HistoryAge = HistoryAgeDefault
	}
	if c.Retention.DeliveryAge == 0 {
		c.Retention.DeliveryAge = DeliveryAgeDefault
	}
	if err := errors.Join(envErrs...); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := c.validate(readsOf(service)); err != nil {
		return nil, err
	}
	return &c, nil
}

// lookupOrFile returns the variable name, or when it is unset the contents of
// the file that name_FILE points at.
func lookupOrFile(lookup func(string) (string, bool), name string) (string, error) {
	if v, ok := lookup(name); ok && v != "" {
		return v, nil
	}
	if path, ok := lookup(name + "_FILE"); ok && path != "" {
		return readSecretFile(path)
	}
	return "", nil
}

func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read secret file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func (c *Config) validate(r reads) error {
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
			// "whsec_${TYPO}" or "${VAR:- }" is not empty, but a signature
			// made with key "whsec_" or " " is one anybody can make.
			if r.webhookSecrets && secretKey(ep.Provider, s) == "" {
				errs = append(errs, fmt.Errorf("config: %s.secrets[%d] is empty once spaces and its prefix are gone (endpoint %q; is its environment variable set?)", where, j, ep.ID))
			}
		}
		// The provider's name, the keys only some providers read, and what
		// the provider checks itself (a Chargebee secret's shape, a GitHub
		// hook, a Stripe key's mode).
		for _, err := range registry.CheckEndpoint(&ep) {
			errs = append(errs, fmt.Errorf("config: %s.%w", where, err))
		}
	}
	if c.Relay.BatchSize < 0 || c.Relay.InFlight < 0 || c.Relay.PollInterval < 0 || c.Relay.ProduceTimeout < 0 {
		errs = append(errs, errors.New("config: relay settings must not be negative"))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"processor.retry_window", c.Processor.RetryWindow}, {"processor.backoff_base", c.Processor.BackoffBase},
		{"processor.backoff_max", c.Processor.BackoffMax}, {"processor.partition_check_interval", c.Processor.PartitionCheckInterval},
		{"processor.session_timeout", c.Processor.SessionTimeout}, {"processor.heartbeat_interval", c.Processor.HeartbeatInterval},
		{"processor.rebalance_timeout", c.Processor.RebalanceTimeout}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("config: %s must not be negative", f.name))
		}
	}
	if c.Processor.MaxAttempts < 0 {
		errs = append(errs, errors.New("config: processor.max_attempts must not be negative (0: no cap)"))
	}
	if u := c.Effects.ReceiptURL; u != "" {
		if err := action.CheckURL(u); err != nil {
			errs = append(errs, fmt.Errorf("config: effects.receipt_url (or RECEIPT_WEBHOOK_URL): %w", err))
		}
	}
	if c.Effects.Timeout < 0 || c.Effects.PollInterval < 0 || c.Effects.BackoffBase < 0 || c.Effects.BackoffMax < 0 {
		errs = append(errs, errors.New("config: effects.timeout, poll_interval, backoff_base and backoff_max must not be negative"))
	}
	if !c.Changes.Publishing() && len(c.Changes.Subscribers) > 0 {
		errs = append(errs, errors.New("config: changes.subscribers receive the change stream, which changes.publish: false turns off"))
	}
	if c.Effects.BatchSize < 0 || c.Effects.MaxAttempts < 0 {
		errs = append(errs, errors.New("config: effects.batch_size and max_attempts must not be negative"))
	}
	if c.Reconcile.Interval < 0 || c.Reconcile.StaleAfter < 0 || c.Reconcile.Overlap < 0 || c.Reconcile.Backfill < 0 {
		errs = append(errs, errors.New("config: reconciler.interval, stale_after, overlap and backfill must not be negative"))
	}
	if c.Reconcile.PageSize < 0 || c.Reconcile.PageSize > 100 {
		errs = append(errs, errors.New("config: reconciler.page_size must be between 1 and 100 (0: the default)"))
	}
	if c.Reconcile.StripeRate < 0 || c.Reconcile.ChargebeeRate < 0 || c.Reconcile.GitHubRate < 0 {
		errs = append(errs, errors.New("config: reconciler.stripe_rate, chargebee_rate and github_rate must not be negative"))
	}
	switch rt := c.Retention; {
	case rt.PayloadAge < 0:
		errs = append(errs, errors.New("config: retention.payload_age must not be negative (0 keeps payloads forever)"))
	case rt.MinPurgeAge < 0 || rt.AuditAge < 0:
		errs = append(errs, errors.New("config: retention.min_purge_age and retention.audit_age must not be negative"))
	case rt.PayloadAge > 0 && rt.PayloadAge < rt.MinPurgeAge:
		errs = append(errs, fmt.Errorf("config: retention.payload_age %s is below retention.min_purge_age %s", rt.PayloadAge, rt.MinPurgeAge))
	}
	if err := c.Facts.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("config: %w", err))
	}
	if err := c.Effects.Declare.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("config: %w", err))
	}
	if err := c.Changes.Subscribers.Validate(r.subscriberSecrets); err != nil {
		errs = append(errs, fmt.Errorf("config: %w", err))
	}
	for _, sub := range c.Changes.Subscribers {
		if c.Effects.Declare.Find(sub.Kind()) != nil {
			errs = append(errs, fmt.Errorf("config: effects.declare kind %s is also changes subscriber %s's kind", sub.Kind(), sub.Name))
		}
	}
	for i, f := range c.Projection.StateFields {
		if strings.TrimSpace(f) == "" {
			errs = append(errs, fmt.Errorf("config: projection.state_fields[%d] is empty", i))
		}
	}
	if rt := c.Retention; rt.PartitionInterval != 0 && (rt.PartitionInterval < time.Minute || rt.PartitionInterval%time.Minute != 0) {
		errs = append(errs, fmt.Errorf("config: retention.partition_interval %s must be a whole number of minutes, at least 1m", rt.PartitionInterval))
	}
	if rt := c.Retention; rt.DeadPayloadAge < 0 || rt.HistoryAge < 0 {
		errs = append(errs, errors.New("config: retention.dead_payload_age and retention.history_age must not be negative"))
	}
	if c.Retention.IdentityAge < 0 {
		errs = append(errs, errors.New("config: retention.identity_age must not be negative"))
	}
	if c.Retention.DeliveryAge < 0 {
		errs = append(errs, errors.New("config: retention.delivery_age must not be negative"))
	}
	errs = append(errs, c.Ops.validate(r)...)
	return errors.Join(errs...)
}

// StripeBase returns the Stripe API base URL, or def when STRIPE_API_BASE is unset.
func (c *Config) StripeBase(def string) string { return cmp.Or(c.StripeAPIBase, def) }

// Publishing says whether the change stream is on (changes.publish, true
// unless set false).
func (c Changes) Publishing() bool { return c.Publish == nil || *c.Publish }
