// Package cli builds hookyard's services from the config and runs the
// binary's subcommands. It owns wiring only: no service logic lives here.
package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/hookyard/hookyard/effects"
	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/db"
	"github.com/hookyard/hookyard/pkg/health"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/ops/api"
	"github.com/hookyard/hookyard/pkg/ops/job"
	"github.com/hookyard/hookyard/pkg/ops/metrics"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/registry"
	"github.com/hookyard/hookyard/pkg/retention"
	"github.com/hookyard/hookyard/pkg/subscriber"
	"github.com/hookyard/hookyard/pkg/topic"
	"github.com/hookyard/hookyard/processor"
	"github.com/hookyard/hookyard/receiver"
	"github.com/hookyard/hookyard/reconciler"
)

// SimAddrDefault is where `hookyard dev` serves its Stripe simulator.
const SimAddrDefault = "127.0.0.1:12111"

// DevReconcileInterval is the longest `hookyard dev` waits between
// reconciler rounds, whatever the config says (the contract: every 30 s).
const DevReconcileInterval = 30 * time.Second

// RepublishBatchDefault is how many pending events `hookyard dev`
// re-publishes per statement at start-up.
const RepublishBatchDefault = 1000

// embeddedKafkaPort is where `hookyard dev` serves its embedded Kafka (the
// contract's 127.0.0.1:9092); tests set 0 for a free port.
var embeddedKafkaPort = 9092

// env carries what every service needs.
type env struct {
	cfg  *config.Config
	log  *slog.Logger
	pool *pgxpool.Pool
	reg  *prometheus.Registry

	// conns are the providers' API connections, built once so the
	// processor and the reconciler of `hookyard dev` share each key's rate
	// limiter and breaker.
	connsOnce sync.Once
	conns     map[string]provider.Connection
	connsErr  error

	// devBases (by provider name) and devSites (by endpoint id) point
	// the providers' API clients at `hookyard dev`'s simulators when
	// STRIPE_API_BASE, GITHUB_API_BASE or an endpoint's site is unset.
	devBases map[string]string
	devSites map[string]string
}

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serviceIdleInTransactionTimeout is the services' pool's
// idle_in_transaction_session_timeout.
const serviceIdleInTransactionTimeout = time.Minute

// openDB creates the database when missing, migrates it and opens the pool.
func openDB(ctx context.Context, cfg *config.Config, log *slog.Logger, maxConns int32) (*pgxpool.Pool, error) {
	if err := db.EnsureDatabase(ctx, cfg.DatabaseURL, log); err != nil {
		return nil, err
	}
	// No service idles inside a transaction on purpose (none holds one
	// across a network call), so a transaction idle this long is an orphan
	// of a dead host: the server ends it and frees its locks. The relay's
	// claims and the fence's holders set their own, shorter bounds.
	pool, err := db.Open(ctx, cfg.DatabaseURL, db.Options{MaxConns: maxConns, IdleInTransactionTimeout: serviceIdleInTransactionTimeout})
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx, pool, log); err != nil {
		pool.Close()
		return nil, err
	}
	// Partitions ahead of now before any service writes: intake with no
	// partition for its body fails (5xx) rather than storing it anywhere.
	if _, err := retention.Ensure(ctx, pool, log, *retentionPolicy(cfg), time.Now()); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// retentionPolicy is the retention pass's policy from the config.
func retentionPolicy(cfg *config.Config) *retention.Policy {
	rt := cfg.Retention
	return &retention.Policy{PayloadAge: rt.PayloadAge, PartitionInterval: rt.PartitionInterval,
		DeadPayloadAge: rt.DeadPayloadAge, IdentityAge: rt.IdentityAge, HistoryAge: rt.HistoryAge, AuditAge: rt.AuditAge,
		DeliveryAge: rt.DeliveryAge}
}

func brokers(cfg *config.Config) []string {
	if len(cfg.KafkaBrokers) > 0 {
		return cfg.KafkaBrokers
	}
	return []string{config.KafkaAddrDefault}
}

func ensureTopic(ctx context.Context, cfg *config.Config, seeds []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	if _, err = topic.Ensure(ctx, cl, cfg.Kafka.Topic, cfg.Kafka.Partitions, cfg.Kafka.Replication); err != nil {
		return err
	}
	if cfg.Kafka.ChangesTopic == "" { // changes.publish: false
		return nil
	}
	_, err = topic.EnsureCompacted(ctx, cl, cfg.Kafka.ChangesTopic, cfg.Kafka.Partitions, cfg.Kafka.Replication)
	return err
}

func (e *env) receiver() (*receiver.Receiver, error) {
	rc := e.cfg.Receiver
	return receiver.New(e.pool, e.log, receiver.Config{Addr: e.cfg.HTTPAddr, Endpoints: e.cfg.Endpoints,
		BodyLimit: rc.BodyLimit, CommitTimeout: rc.CommitTimeout, ReadTimeout: rc.ReadTimeout,
		MaxConns: rc.MaxConnections, BodyBytes: rc.BodyBytes, ConnsPerClient: rc.ConnsPerClient, FirstByteTimeout: rc.FirstByteTimeout,
		Commit:     inbox.CommitterConfig{Workers: e.cfg.Receiver.CommitWorkers, MaxBatch: e.cfg.Receiver.MaxBatch},
		Registerer: e.reg, Gatherer: e.reg})
}

func (e *env) relay(seeds []string) (*outboxrelay.Relay, error) {
	rc := e.cfg.Relay
	return outboxrelay.New(e.pool, e.log, outboxrelay.Config{Brokers: seeds, Topic: e.cfg.Kafka.Topic,
		ChangesTopic: e.cfg.Kafka.ChangesTopic, Registerer: e.reg,
		BatchSize: rc.BatchSize, InFlight: rc.InFlight, PollInterval: rc.PollInterval, ProduceTimeout: rc.ProduceTimeout,
		TopicPartitions: e.cfg.Kafka.Partitions, TopicReplication: e.cfg.Kafka.Replication})
}

// apiOptions are what the config says about each provider's API, by
// provider name. Their config keys and environment variables carry the
// provider's name (STRIPE_API_BASE, reconciler.stripe_rate), so this is
// the one place that maps them; a provider with no keys of its own needs
// no entry.
func (e *env) apiOptions(stripeBase string) map[string]provider.APIOptions {
	rc := e.cfg.Reconcile
	return map[string]provider.APIOptions{
		// One client per credentials, shared by the processor's fetches and
		// the reconciler's reads in one process: one quota, one breaker. The
		// reconciler's reads also wait on the smaller background bucket
		// (reconciler.stripe_rate), so a round never takes the whole quota.
		provider.Stripe:    {BaseURL: stripeBase, APIKey: e.cfg.StripeAPIKey, ReconcileRate: rc.StripeRate, Log: e.log},
		provider.Chargebee: {EndpointBase: e.devSites, ReconcileRate: rc.ChargebeeRate, Log: e.log},
		provider.GitHub:    {BaseURL: cmp.Or(e.cfg.GitHubAPIBase, e.devBases[provider.GitHub]), ReconcileRate: rc.GitHubRate, Log: e.log},
	}
}

// connections are the API connections of every provider that has an API,
// by name. stripeBase is the same for every endpoint of a process, so the
// first call's is kept.
func (e *env) connections(stripeBase string) (map[string]provider.Connection, error) {
	e.connsOnce.Do(func() {
		e.conns, e.connsErr = registry.Connect(e.cfg.Endpoints, e.apiOptions(stripeBase))
	})
	return e.conns, e.connsErr
}

// fetchers are the processor's Fetchers: each provider whose connection
// reads current state, by name.
func fetchers(conns map[string]provider.Connection) map[string]provider.Fetcher {
	out := map[string]provider.Fetcher{}
	for name, c := range conns {
		if f := c.Fetcher(); f != nil {
			out[name] = f
		}
	}
	return out
}

func (e *env) processor(seeds []string, stripeBase string) (*processor.Processor, error) {
	conns, err := e.connections(stripeBase)
	if err != nil {
		return nil, err
	}
	return processor.New(e.pool, e.log, processor.Config{Brokers: seeds, Topic: e.cfg.Kafka.Topic,
		ChangesTopic: e.cfg.Kafka.ChangesTopic, Group: e.cfg.Kafka.Group,
		Endpoints: e.cfg.Endpoints, RetryWindow: e.cfg.Processor.RetryWindow, MaxAttempts: e.cfg.Processor.MaxAttempts,
		BackoffBase: e.cfg.Processor.BackoffBase, BackoffMax: e.cfg.Processor.BackoffMax,
		PartitionCheckInterval: e.cfg.Processor.PartitionCheckInterval, Registerer: e.reg,
		SessionTimeout: e.cfg.Processor.SessionTimeout, HeartbeatInterval: e.cfg.Processor.HeartbeatInterval,
		RebalanceTimeout: e.cfg.Processor.RebalanceTimeout,
		Facts:            e.cfg.Facts, Effects: e.cfg.Effects.Declare, StateFields: e.cfg.Projection.StateFields,
		Fetchers: fetchers(conns)})
}

// reconciler builds the reconciler. kafka reads the processors' group
// progress, which tells lost events from slow ones; nil re-publishes none.
// A positive interval caps the configured one (dev reconciles every 30 s).
func (e *env) reconciler(stripeBase string, interval time.Duration, kafka *kgo.Client) (*reconciler.Reconciler, error) {
	return e.newReconciler(stripeBase, interval, kafka, e.reg)
}

// newReconciler builds a reconciler whose metrics go to reg.
func (e *env) newReconciler(stripeBase string, interval time.Duration, kafka *kgo.Client, reg *prometheus.Registry) (*reconciler.Reconciler, error) {
	sources, err := e.reconcileSources(stripeBase)
	if err != nil {
		return nil, err
	}
	conns, err := e.connections(stripeBase)
	if err != nil {
		return nil, err
	}
	// The database-wide gauges (inbox backlog, open actions) are reported by
	// the reconciler, a single service that does not depend on the
	// processors being healthy: a backlog must show while they are down.
	if err := reg.Register(metrics.New(e.pool, e.log, metrics.Config{})); err != nil {
		if !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			e.log.Warn("register database gauges", slog.String("error", err.Error()))
		}
	}
	iv := e.cfg.Reconcile.Interval
	if interval > 0 && (iv <= 0 || iv > interval) {
		iv = interval
	}
	var progress reconciler.Progress
	if kafka != nil {
		progress = topic.GroupProgress{Client: kafka, Topic: e.cfg.Kafka.Topic, Group: e.cfg.Kafka.Group}
	}
	return reconciler.New(e.pool, e.log, reconciler.Config{Sources: sources,
		Interval: iv, StaleAfter: e.cfg.Reconcile.StaleAfter, Overlap: e.cfg.Reconcile.Overlap, Backfill: e.cfg.Reconcile.Backfill, PageSize: e.cfg.Reconcile.PageSize,
		Retention: retentionPolicy(e.cfg), AuditRetention: e.cfg.Retention.AuditAge, Registerer: reg, Progress: progress,
		StateFields: e.cfg.Projection.StateFields,
		// The processor has an API client for these (e.processor's Fetchers).
		FetchProviders: slices.Sorted(maps.Keys(fetchers(conns)))}), nil
}

// effects builds the external-effects sender. Without a receipt URL it
// runs idle and receipts stay pending.
func (e *env) effects() (*effects.Sender, error) {
	ec := e.cfg.Effects
	return effects.New(e.pool, e.log, effects.Config{ReceiptURL: ec.ReceiptURL, Effects: ec.Declare, Timeout: ec.Timeout, BatchSize: ec.BatchSize,
		PollInterval: ec.PollInterval, BackoffBase: ec.BackoffBase, BackoffMax: ec.BackoffMax, MaxAttempts: ec.MaxAttempts,
		Subscribers: e.cfg.Changes.Subscribers, Registerer: e.reg})
}

// subscriberFeeder builds the runner of the changes topic's subscriber
// feeder (package subscriber), wherever the effects sender runs; without
// subscribers it returns at once.
func (e *env) subscriberFeeder(seeds []string) (func(context.Context) error, error) {
	if len(e.cfg.Changes.Subscribers) == 0 {
		return func(context.Context) error { return nil }, nil
	}
	f, err := subscriber.NewFeeder(e.pool, e.log, subscriber.FeederConfig{Brokers: seeds, Topic: e.cfg.Kafka.ChangesTopic,
		Subscribers: e.cfg.Changes.Subscribers})
	if err != nil {
		return nil, err
	}
	return f.Run, nil
}

// actionsWaiting says, per action kind, why actions of that kind are not
// being sent, for explain and `actions show`.
func actionsWaiting(cfg *config.Config) map[string]string {
	var out map[string]string
	for _, ef := range cfg.Effects.Declare.With(action.DefaultEffects) {
		if ef.URL != "" || (ef.Kind == action.KindReceipt && cfg.Effects.ReceiptURL != "") {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[ef.Kind] = effects.ReasonNoURL
		if ef.Kind != action.KindReceipt {
			out[ef.Kind] = "no url configured for effect " + ef.Kind + " (effects.declare url or url_env): its actions stay pending"
		}
	}
	return out
}

// opsAPI builds the query/ops API and the runner of its jobs; run both.
func (e *env) opsAPI() (*echo.Echo, *job.Runner) {
	jobs := api.NewJobs(e.pool, e.log, brokers(e.cfg), e.cfg.Kafka.Topic)
	auth := opsAuth(e.cfg)
	ops := api.New(e.pool, e.log, api.Config{Auth: auth, Policy: e.cfg.Access, Gatherer: e.reg,
		Brokers: brokers(e.cfg), Topic: e.cfg.Kafka.Topic, ChangesTopic: e.cfg.Kafka.ChangesTopic, ActionsWaiting: actionsWaiting(e.cfg), Effects: e.cfg.Effects.Declare, Jobs: jobs,
		MinPurgeAge: e.cfg.Retention.MinPurgeAge, AuditAge: e.cfg.Retention.AuditAge})
	e.mountConsole(ops, jobs, auth)
	return ops, jobs
}

// opsAuth is the authenticator of every page on the ops address: OPS_TOKEN
// with every scope, and the config's scoped tokens.
func opsAuth(cfg *config.Config) *api.Authenticator {
	var tokens []api.Token
	for _, t := range cfg.Ops.Tokens {
		tok := api.Token{Name: t.Name, Secret: t.Token}
		for _, s := range t.Scopes {
			tok.Scopes = append(tok.Scopes, api.Scope(s))
		}
		tokens = append(tokens, tok)
	}
	return api.NewAuthenticator(cfg.OpsToken, tokens)
}

// serveMetrics serves /healthz, /readyz and /metrics for services without
// an HTTP port of their own.
func (e *env) serveMetrics(ctx context.Context, checks ...health.Check) error {
	h := health.NewEcho()
	health.Register(h, e.reg, append([]health.Check{func(ctx context.Context) error { return e.pool.Ping(ctx) }}, checks...)...)
	return health.Serve(ctx, h, e.cfg.MetricsAddr, e.log)
}

// runDev runs every service in one process, with an embedded Kafka broker
// unless KAFKA_BROKERS is set and a Stripe simulator unless STRIPE_API_BASE
// is set.
func runDev(ctx context.Context, e *env, simAddr string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seeds := e.cfg.KafkaBrokers
	embedded := len(seeds) == 0
	if embedded {
		cluster, err := kfake.NewCluster(kfake.Ports(embeddedKafkaPort), kfake.SeedTopics(e.cfg.Kafka.Partitions, e.cfg.Kafka.Topic))
		if err != nil {
			return fmt.Errorf("start embedded kafka on %s: %w", config.KafkaAddrDefault, err)
		}
		defer cluster.Close()
		if ct := e.cfg.Kafka.ChangesTopic; ct != "" {
			if err := cluster.CreateTopic(ct, e.cfg.Kafka.Partitions, map[string]string{"cleanup.policy": "compact"}); err != nil {
				return fmt.Errorf("create topic %s on the embedded kafka: %w", ct, err)
			}
		}
		seeds = cluster.ListenAddrs()
		e.log.InfoContext(ctx, "embedded kafka", slog.Any("addrs", seeds), slog.String("topic", e.cfg.Kafka.Topic),
			slog.String("changes_topic", e.cfg.Kafka.ChangesTopic))
	} else if err := ensureTopic(ctx, e.cfg, seeds); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	stripeBase, err := e.startSimulators(ctx, g, simAddr)
	if err != nil {
		return err
	}
	rcv, err := e.receiver()
	if err != nil {
		return err
	}
	rel, err := e.relay(seeds)
	if err != nil {
		return err
	}
	proc, err := e.processor(seeds, stripeBase)
	if err != nil {
		return err
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer kc.Close()
	rec, err := e.reconciler(stripeBase, DevReconcileInterval, kc)
	if err != nil {
		return err
	}
	snd, err := e.effects()
	if err != nil {
		return err
	}
	feed, err := e.subscriberFeeder(seeds)
	if err != nil {
		return err
	}
	ops, jobs := e.opsAPI()
	g.Go(func() error { return rcv.Run(ctx) })
	g.Go(func() error { return rel.Run(ctx) })
	g.Go(func() error { return proc.Run(ctx) })
	g.Go(func() error { return rec.Run(ctx) })
	g.Go(func() error { return snd.Run(ctx) })
	g.Go(func() error { return feed(ctx) })
	g.Go(func() error { return health.Serve(ctx, ops, e.cfg.OpsAddr, e.log) })
	g.Go(func() error { return jobs.Run(ctx) })
	if embedded {
		// The embedded broker starts empty: whatever was pending when the
		// last dev run stopped goes out again. In the background and in
		// batches, after the services started: a large backlog in one
		// statement kept the receiver from answering for minutes.
		g.Go(func() error {
			n, err := inbox.RepublishPending(ctx, e.pool, RepublishBatchDefault)
			if err != nil && ctx.Err() == nil {
				// The reconciler re-publishes what this missed: with an
				// empty broker every such record is read past, so lost.
				e.log.WarnContext(ctx, "re-publish pending events", slog.Int64("count", n), slog.String("error", err.Error()))
			} else if n > 0 {
				e.log.InfoContext(ctx, "re-published pending events", slog.Int64("count", n))
			}
			return nil
		})
	}
	err = g.Wait()
	e.log.Info("stopped")
	return err
}

// startSimulators serves, on simAddr, a simulator for each provider API dev
// has no real address for (provider.DevSimulator): Stripe at / (unless
// STRIPE_API_BASE is set), the GitHub hook of the first GitHub endpoint that
// names one at /github (unless GITHUB_API_BASE is set), the Chargebee site
// of the first Chargebee endpoint with an api_key and no site at
// /chargebee. It returns the Stripe API base to use.
func (e *env) startSimulators(ctx context.Context, g *errgroup.Group, simAddr string) (string, error) {
	stripeBase := e.cfg.StripeAPIBase
	mux := http.NewServeMux()
	opts := e.apiOptions(stripeBase)
	e.devBases, e.devSites = map[string]string{}, map[string]string{}
	type served struct {
		name string
		sim  *provider.Simulation
	}
	var sims []served
	for _, p := range registry.All() {
		dev := registry.Simulator(p.Name())
		if dev == nil || opts[p.Name()].BaseURL != "" {
			continue
		}
		sim := dev.Simulate(e.cfg.Endpoints, provider.DevOptions{WebhookBase: "http://" + e.cfg.HTTPAddr, APIKey: opts[p.Name()].APIKey})
		if sim == nil {
			continue
		}
		if sim.Root {
			mux.Handle("/", sim.Handler)
		} else {
			mux.Handle("/"+p.Name()+"/", http.StripPrefix("/"+p.Name(), sim.Handler))
		}
		sims = append(sims, served{p.Name(), sim})
	}
	if len(sims) == 0 {
		return stripeBase, nil
	}
	ln, err := net.Listen("tcp", simAddr)
	if err != nil {
		return "", fmt.Errorf("start provider simulators on %s: %w", simAddr, err)
	}
	base := "http://" + ln.Addr().String()
	logAttrs := []any{slog.String("addr", base)}
	for _, sv := range sims {
		simBase := base
		if !sv.sim.Root {
			simBase += "/" + sv.name
			logAttrs = append(logAttrs, slog.Bool(sv.name, true))
		}
		if sv.sim.Endpoints == nil {
			e.devBases[sv.name] = simBase
			continue
		}
		for _, id := range sv.sim.Endpoints {
			e.devSites[id] = simBase
		}
	}
	srv := &http.Server{Handler: loopbackOnly(mux), ReadHeaderTimeout: 10 * time.Second}
	g.Go(func() error { <-ctx.Done(); return srv.Close() })
	g.Go(func() error {
		e.log.InfoContext(ctx, "provider simulators", logAttrs...)
		if err := srv.Serve(ln); err != http.ErrServerClosed {
			return err
		}
		return nil
	})
	return cmp.Or(stripeBase, e.devBases[provider.Stripe]), nil
}
