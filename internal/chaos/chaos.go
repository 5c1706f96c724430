package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/hookyard/hookyard/pkg/access"
)

// Defaults of Config: `make chaos` runs these sizes.
const (
	SubscriptionsDefault = 10000
	EventsDefault        = 100000
	// EventsPerSecondDefault keeps the Stripe half of the traffic (every
	// event a fetch) inside the fetch budget of the processors left when
	// one is down: each reads Stripe at most 50 calls/s
	// (stripe.RatePerSecondDefault). At 300 events/s, 150 fetches/s
	// met 100/s of budget during each kill, and the backlog never
	// drained: a throughput limit of the fetch path, not an ordering bug.
	EventsPerSecondDefault   = 100
	PartitionsDefault        = 12
	ProcessorsDefault        = 3
	RelaysDefault            = 2
	MaxDelayDefault          = time.Second
	QuiesceTimeoutDefault    = 5 * time.Minute
	ReconcileIntervalDefault = 3 * time.Second
	// SessionTimeout is the processors' default group session timeout
	// (processor.SessionTimeoutDefault); a paused processor is held
	// frozen past it.
	SessionTimeout = 6 * time.Second
)

// ErrViolation is returned when an invariant did not hold.
var ErrViolation = errors.New("chaos: invariant violated")

// Config configures a run.
type Config struct {
	// Seed decides lifecycles, deliveries and faults. Defaults to 1.
	Seed int64
	// Subscriptions played, half Stripe, half Chargebee. Defaults to
	// SubscriptionsDefault.
	Subscriptions int
	// Events is about how many provider events they produce. Defaults to
	// EventsDefault.
	Events int
	// EventsPerSecond spreads the events over the traffic window (at
	// least 40 s, so that every kind of fault happens). Defaults to
	// EventsPerSecondDefault.
	EventsPerSecond int
	// Binary is the hookyard binary whose subcommands run the services.
	// Required.
	Binary string
	// DatabaseURL names the Postgres server; the run creates a database of
	// its own there and drops it at the end. Required.
	DatabaseURL string
	// KafkaBrokers is a real cluster; the run uses a topic and group of its
	// own. Defaults to none: a three-broker kfake cluster in this process.
	KafkaBrokers []string
	// Partitions of the topic. Defaults to PartitionsDefault.
	Partitions int32
	// Processors in the group. Defaults to ProcessorsDefault.
	Processors int
	// Relays side by side. Defaults to RelaysDefault.
	Relays int
	// MaxDelay is the usual delivery delay; one delivery in ten is up to
	// five times later. Defaults to MaxDelayDefault.
	MaxDelay time.Duration
	// QuiesceTimeout bounds the wait for the system to settle after the
	// traffic. Defaults to QuiesceTimeoutDefault, or the traffic's length
	// when longer.
	QuiesceTimeout time.Duration
	// ReconcileInterval is the reconciler's round interval. Defaults to
	// ReconcileIntervalDefault.
	ReconcileInterval time.Duration
	// NoFaults runs the traffic without faults.
	NoFaults bool
	// ExtraServices are more subcommands to run with the same environment
	// (the effects sender, once it exists; it gets RECEIPT_WEBHOOK_URL).
	ExtraServices []string
	// Dir keeps the config and the services' logs; defaults to a temporary
	// directory removed at the end unless KeepLogs.
	Dir      string
	KeepLogs bool
	// KeepDatabase leaves the run's database for inspection.
	KeepDatabase bool
	// LogLevel of the services. Defaults to "warn".
	LogLevel string
	// Log receives the harness's own progress. Defaults to discarding.
	Log *slog.Logger

	// schedule replaces the seeded faults, and trafficFor the traffic
	// window, for tests that stage one fault.
	schedule   []fault
	trafficFor time.Duration
}

func (c Config) withDefaults() Config {
	c.Seed = cmp.Or(c.Seed, 1)
	c.Subscriptions = cmp.Or(c.Subscriptions, SubscriptionsDefault)
	c.Events = cmp.Or(c.Events, EventsDefault)
	c.EventsPerSecond = cmp.Or(c.EventsPerSecond, EventsPerSecondDefault)
	c.Partitions = cmp.Or(c.Partitions, PartitionsDefault)
	c.Processors = cmp.Or(c.Processors, ProcessorsDefault)
	c.Relays = cmp.Or(c.Relays, RelaysDefault)
	c.MaxDelay = cmp.Or(c.MaxDelay, MaxDelayDefault)
	c.QuiesceTimeout = cmp.Or(c.QuiesceTimeout, max(QuiesceTimeoutDefault, c.traffic()))
	c.ReconcileInterval = cmp.Or(c.ReconcileInterval, ReconcileIntervalDefault)
	c.LogLevel = cmp.Or(c.LogLevel, "warn")
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Binary == "":
		return errors.New("chaos config: Binary is required")
	case c.DatabaseURL == "":
		return errors.New("chaos config: DatabaseURL is required")
	case c.Processors < 2:
		return errors.New("chaos config: Processors must be at least 2 (a survivor takes the killed one's partitions)")
	case c.Subscriptions < 2:
		return errors.New("chaos config: Subscriptions must be at least 2")
	}
	return nil
}

func (c Config) traffic() time.Duration {
	if c.trafficFor > 0 {
		return c.trafficFor
	}
	return max(40*time.Second, time.Duration(c.Events)*time.Second/time.Duration(c.EventsPerSecond))
}

func (c Config) planConfig() planConfig {
	return planConfig{seed: c.Seed, subscriptions: c.Subscriptions, events: c.Events, traffic: c.traffic(),
		maxDelay: c.MaxDelay, processors: c.Processors, relays: c.Relays, sessionPause: SessionTimeout + 3*time.Second,
		brokerFaults: len(c.KafkaBrokers) == 0, faults: !c.NoFaults}
}

// Run plays one run and writes its table to out. It returns a Report and
// ErrViolation when an invariant did not hold.
func Run(ctx context.Context, cfg Config, out io.Writer) (Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	p := newPlan(cfg.planConfig())
	if cfg.schedule != nil {
		p.faults = cfg.schedule
	}
	rep := Report{Seed: cfg.Seed, Digest: p.digest(), Subscriptions: len(p.subs), Events: len(p.events),
		Dropped: p.dropped, Duplicated: p.duplicated, Concurrent: p.concurrent, Faults: len(p.faults)}
	fmt.Fprintf(out, "hookyard chaos: seed %d, schedule %s: %d subscriptions, %d events (%d dropped for good, %d of them final Stripe cancellations left to the reconciler; %d duplicated, %d of them concurrently), %d faults over %s\n",
		cfg.Seed, rep.Digest, rep.Subscriptions, rep.Events, rep.Dropped, p.droppedFinal, rep.Duplicated, rep.Concurrent, rep.Faults, cfg.traffic())
	began := time.Now()
	s, err := start(ctx, cfg)
	if err != nil {
		return rep, err
	}
	defer s.close(context.WithoutCancel(ctx))
	if cfg.KeepLogs {
		fmt.Fprintf(out, "logs and config in %s\n", s.dir)
	}
	tr := newTraffic(s, p)
	sm := &sampler{s: s, p: p, http: tr.http}
	in := &injector{s: s}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go sm.run(sampleCtx, 50*time.Millisecond, cfg.Seed)
	done := make(chan struct{})
	go func() { in.run(ctx, p.faults); close(done) }()
	tr.run(ctx, 32)
	<-done
	rep.TrafficTook = time.Since(began)
	for _, pr := range s.all() {
		if pr.exited() {
			rep.Exited = append(rep.Exited, pr.name)
			fmt.Fprintf(out, "%s exited on its own; its log ends:\n%s\n", pr.name, tail(pr.logPath, 2000))
			_ = pr.start()
		}
	}
	settled := s.quiesce(ctx, tr, cfg.QuiesceTimeout)
	rep.QuiesceTook = settled
	stopSampling()
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	s.check(ctx, &rep, tr, sm, in)
	rep.print(out)
	in.print(out)
	if rep.violated() {
		s.explainViolations(ctx, rep, out)
		return rep, ErrViolation
	}
	return rep, nil
}

// access asks the ops API for a subscription's decision.
func (s *system) access(ctx context.Context, sb sub) (access.Decision, error) {
	prov, acct := stripeProv, stripeAccount
	if sb.prov == chargebeeProv {
		prov, acct = chargebeeProv, cbSite
	}
	var d access.Decision
	err := s.opsGet(ctx, fmt.Sprintf("/v1/access/%s/%s/%s/%s", prov, acct, environmentName, sb.id), &d)
	return d, err
}

// DefaultDatabaseURL is the server `make test` and `hookyard chaos` use
// when neither TEST_DATABASE_URL nor DATABASE_URL is set.
func DefaultDatabaseURL() string {
	return cmp.Or(os.Getenv("TEST_DATABASE_URL"), os.Getenv("DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
}
