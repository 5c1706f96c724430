// Package cli builds hookyard's services from the config and runs the
// binary's subcommands. It owns wiring only: no service logic lives here.
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/db"
	"github.com/hookyard/hookyard/pkg/health"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/opsapi"
	"github.com/hookyard/hookyard/pkg/opsmetrics"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/stripeapi"
	"github.com/hookyard/hookyard/pkg/stripesim"
	"github.com/hookyard/hookyard/pkg/topic"
	"github.com/hookyard/hookyard/processor"
	"github.com/hookyard/hookyard/receiver"
	"github.com/hookyard/hookyard/reconciler"
)

// SimAddrDefault is where `hookyard dev` serves its Stripe simulator.
const SimAddrDefault = "127.0.0.1:12111"

// env carries what every service needs.
type env struct {
	cfg  *config.Config
	log  *slog.Logger
	pool *pgxpool.Pool
	reg  *prometheus.Registry
}

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// openDB creates the database when missing, migrates it and opens the pool.
func openDB(ctx context.Context, cfg *config.Config, log *slog.Logger, maxConns int32) (*pgxpool.Pool, error) {
	if err := db.EnsureDatabase(ctx, cfg.DatabaseURL, log); err != nil {
		return nil, err
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, db.Options{MaxConns: maxConns})
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx, pool, log); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
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
	_, err = topic.Ensure(ctx, cl, cfg.Kafka.Topic, cfg.Kafka.Partitions, cfg.Kafka.Replication)
	return err
}

func (e *env) receiver() (*receiver.Receiver, error) {
	return receiver.New(e.pool, e.log, receiver.Config{Addr: e.cfg.HTTPAddr, Endpoints: e.cfg.Endpoints,
		BodyLimit: e.cfg.Receiver.BodyLimit, CommitTimeout: e.cfg.Receiver.CommitTimeout,
		Commit:     inbox.CommitterConfig{Workers: e.cfg.Receiver.CommitWorkers, MaxBatch: e.cfg.Receiver.MaxBatch},
		Registerer: e.reg, Gatherer: e.reg})
}

func (e *env) relay(seeds []string) (*outboxrelay.Relay, error) {
	rc := e.cfg.Relay
	return outboxrelay.New(e.pool, e.log, outboxrelay.Config{Brokers: seeds, Topic: e.cfg.Kafka.Topic, Registerer: e.reg,
		BatchSize: rc.BatchSize, InFlight: rc.InFlight, PollInterval: rc.PollInterval, ProduceTimeout: rc.ProduceTimeout})
}

func (e *env) stripeClient(base string) *stripeapi.Client {
	return stripeapi.New(stripeapi.Config{BaseURL: base, APIKey: e.cfg.StripeAPIKey}, e.log)
}

func (e *env) processor(seeds []string, stripeBase string) (*processor.Processor, error) {
	return processor.New(e.pool, e.log, processor.Config{Brokers: seeds, Topic: e.cfg.Kafka.Topic, Group: e.cfg.Kafka.Group,
		Endpoints: e.cfg.Endpoints, RetryWindow: e.cfg.Processor.RetryWindow, MaxAttempts: e.cfg.Processor.MaxAttempts,
		BackoffBase: e.cfg.Processor.BackoffBase, BackoffMax: e.cfg.Processor.BackoffMax,
		PartitionCheckInterval: e.cfg.Processor.PartitionCheckInterval, Registerer: e.reg,
		Fetchers: map[string]processor.Fetcher{provider.Stripe: processor.StripeFetcher{Client: e.stripeClient(stripeBase)}}})
}

func (e *env) reconciler(stripeBase string, interval time.Duration) *reconciler.Reconciler {
	var sources []reconciler.Source
	cl := e.stripeClient(stripeBase)
	for _, ep := range e.cfg.Endpoints {
		if ep.Provider == provider.Stripe {
			sources = append(sources, reconciler.Source{Provider: ep.Provider, SourceAccount: ep.SourceAccount,
				Environment: ep.Environment, ResourceType: "subscription", Lister: cl})
		}
	}
	// The database-wide gauges (inbox backlog, open actions) are reported by
	// the reconciler, a single service that does not depend on the
	// processors being healthy: a backlog must show while they are down.
	if err := e.reg.Register(opsmetrics.New(e.pool, e.log, opsmetrics.Config{})); err != nil {
		if !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			e.log.Warn("register database gauges", slog.String("error", err.Error()))
		}
	}
	return reconciler.New(e.pool, e.log, reconciler.Config{Sources: sources,
		Interval: max(interval, e.cfg.Reconcile.Interval), StaleAfter: e.cfg.Reconcile.StaleAfter,
		PayloadRetention: e.cfg.Retention.PayloadAge, Registerer: e.reg})
}

func (e *env) opsAPI() *echo.Echo {
	return opsapi.New(e.pool, e.log, opsapi.Config{Token: e.cfg.OpsToken, Policy: e.cfg.Access, Gatherer: e.reg,
		Brokers: brokers(e.cfg), Topic: e.cfg.Kafka.Topic})
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
		cluster, err := kfake.NewCluster(kfake.Ports(9092), kfake.SeedTopics(e.cfg.Kafka.Partitions, e.cfg.Kafka.Topic))
		if err != nil {
			return fmt.Errorf("start embedded kafka on %s: %w", config.KafkaAddrDefault, err)
		}
		defer cluster.Close()
		seeds = cluster.ListenAddrs()
		e.log.InfoContext(ctx, "embedded kafka", slog.Any("addrs", seeds), slog.String("topic", e.cfg.Kafka.Topic))
	} else if err := ensureTopic(ctx, e.cfg, seeds); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	stripeBase := e.cfg.StripeAPIBase
	if stripeBase == "" {
		var secret string
		for _, ep := range e.cfg.Endpoints {
			if ep.Provider == provider.Stripe && len(ep.Secrets) > 0 {
				secret = ep.Secrets[0]
				break
			}
		}
		sim := stripesim.New(stripesim.Config{WebhookURL: "http://" + e.cfg.HTTPAddr + "/webhooks/stripe-dev", WebhookSecret: secret})
		ln, err := net.Listen("tcp", simAddr)
		if err != nil {
			return fmt.Errorf("start stripe simulator on %s: %w", simAddr, err)
		}
		stripeBase = "http://" + ln.Addr().String()
		srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
		g.Go(func() error { <-ctx.Done(); return srv.Close() })
		g.Go(func() error {
			e.log.InfoContext(ctx, "stripe simulator", slog.String("addr", stripeBase))
			if err := srv.Serve(ln); err != http.ErrServerClosed {
				return err
			}
			return nil
		})
	}
	// The embedded broker starts empty: whatever was pending when the last
	// dev run stopped goes out again.
	if embedded {
		n, err := inbox.RequeueStuck(ctx, e.pool, time.Now(), 100000)
		if err != nil {
			return err
		}
		if n > 0 {
			e.log.InfoContext(ctx, "re-published pending events", slog.Int64("count", n))
		}
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
	rec := e.reconciler(stripeBase, time.Minute)
	ops := e.opsAPI()
	g.Go(func() error { return rcv.Run(ctx) })
	g.Go(func() error { return rel.Run(ctx) })
	g.Go(func() error { return proc.Run(ctx) })
	g.Go(func() error { return rec.Run(ctx) })
	g.Go(func() error { return health.Serve(ctx, ops, e.cfg.OpsAddr, e.log) })
	err = g.Wait()
	e.log.Info("stopped")
	return err
}
