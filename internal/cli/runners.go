package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/hookyard/hookyard/pkg/health"
)

func runDemo(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	return demoCmd(ctx, e.cfg, args, stdout)
}

func runChaos(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	return chaosCmd(ctx, e.cfg, e.log, args, stdout)
}

func runMigrate(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	e.log.InfoContext(ctx, "database ready")
	return nil
}

func runDevCmd(ctx context.Context, e *env, args []string, _ io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	public := fs.Bool("listen-public", false, "listen on HTTP_ADDR, OPS_ADDR and SIM_ADDR even when they are not loopback")
	if err := fs.Parse(args); err != nil {
		return usageErr("dev: %v", err)
	}
	simAddr := envOr("SIM_ADDR", SimAddrDefault)
	if err := checkDevListen(*public, map[string]string{"HTTP_ADDR": e.cfg.HTTPAddr, "OPS_ADDR": e.cfg.OpsAddr, "SIM_ADDR": simAddr}); err != nil {
		return err
	}
	return runDev(ctx, e, simAddr)
}

func runReceiver(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	r, err := e.receiver()
	if err != nil {
		return err
	}
	return withMetrics(ctx, e, r.Run)
}

func runAPI(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	ops, jobs := e.opsAPI()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return jobs.Run(ctx) })
	g.Go(func() error { return health.Serve(ctx, ops, e.cfg.OpsAddr, e.log) })
	return g.Wait()
}

func runRelay(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	// The relay creates its topic itself, waiting for the brokers first;
	// /readyz says 503 until it reached the topic.
	r, err := e.relay(brokers(e.cfg))
	if err != nil {
		return err
	}
	return withMetrics(ctx, e, r.Run, r.Check)
}

func runProcessor(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	p, err := e.processor(brokers(e.cfg), stripeBase(e.cfg))
	if err != nil {
		return err
	}
	// The processor records actions; its binary sends them too, so a
	// deployment of processors needs no other service for receipts.
	snd, err := e.effects()
	if err != nil {
		return err
	}
	feed, err := e.subscriberFeeder(brokers(e.cfg))
	if err != nil {
		return err
	}
	// Readiness is true once the processor owns its assignment, false
	// while it waits for brokers, topic or group, and false again when it
	// stopped for good (the topic's partition count changed).
	return withMetrics(ctx, e, func(ctx context.Context) error {
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return p.Run(ctx) })
		g.Go(func() error { return snd.Run(ctx) })
		g.Go(func() error { return feed(ctx) })
		return g.Wait()
	}, p.Check)
}

func runEffects(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	snd, err := e.effects()
	if err != nil {
		return err
	}
	// The changes topic's subscribers are fed where their deliveries are
	// sent.
	feed, err := e.subscriberFeeder(brokers(e.cfg))
	if err != nil {
		return err
	}
	return withMetrics(ctx, e, func(ctx context.Context) error {
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return snd.Run(ctx) })
		g.Go(func() error { return feed(ctx) })
		return g.Wait()
	})
}

func runReconciler(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	kc, err := kgo.NewClient(kgo.SeedBrokers(brokers(e.cfg)...))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer kc.Close()
	rec, err := e.reconciler(stripeBase(e.cfg), 0, kc)
	if err != nil {
		return err
	}
	return withMetrics(ctx, e, rec.Run)
}

func runReconcile(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	return reconcileCmd(ctx, e, args, stdout, stripeBase(e.cfg))
}

func withMetrics(ctx context.Context, e *env, run func(context.Context) error, checks ...health.Check) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return e.serveMetrics(ctx, checks...) })
	g.Go(func() error { return run(ctx) })
	return g.Wait()
}
