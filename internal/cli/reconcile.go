package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/reconciler"
)

// reconcileSources are the reconciler's sources: per endpoint, what its
// provider's connection lists with that endpoint's credentials (Stripe: its
// account's subscriptions and events; Chargebee: its site's events; GitHub:
// its hook's deliveries), in config order.
func (e *env) reconcileSources(stripeBase string) ([]provider.Source, error) {
	conns, err := e.connections(stripeBase)
	if err != nil {
		return nil, err
	}
	var sources []provider.Source
	for i := range e.cfg.Endpoints {
		ep := &e.cfg.Endpoints[i]
		if sourceListed(sources, ep) {
			continue // endpoints sharing a provider, account and environment are one source, one checkpoint
		}
		conn := conns[ep.Provider]
		if conn == nil {
			continue
		}
		src, err := conn.Source(ep)
		if err != nil {
			return nil, fmt.Errorf("endpoint %q: %w", ep.ID, err)
		}
		if src != nil {
			sources = append(sources, *src)
		}
	}
	return sources, nil
}

func sourceListed(sources []provider.Source, ep *provider.Endpoint) bool {
	for _, s := range sources {
		if s.Provider == ep.Provider && s.SourceAccount == ep.SourceAccount && s.Environment == ep.Environment {
			return true
		}
	}
	return false
}

// reconcileCmd runs one round now over the sources the flags select and
// prints what it found. It needs no Kafka: the lost-event requeue (which
// reads the consumer group's progress) is left to the reconciler service.
func reconcileCmd(ctx context.Context, e *env, args []string, stdout io.Writer, stripeBase string) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	var f reconciler.Filter
	fs.StringVar(&f.Provider, "provider", "", "only sources of this provider")
	fs.StringVar(&f.SourceAccount, "account", "", "only sources of this source account")
	fs.StringVar(&f.Environment, "environment", "", "only sources of this environment")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageErr("reconcile [-provider P] [-account A] [-environment E]")
	}
	rec, err := e.newReconciler(stripeBase, 0, nil, prometheus.NewRegistry())
	if err != nil {
		return err
	}
	rep, rerr := rec.Round(ctx, f)
	cps, err := reconciler.Checkpoints(ctx, e.pool)
	if err != nil {
		return err
	}
	// Failed GitHub deliveries GitHub no longer redelivers: their events
	// are lost unless the sender sends them again.
	given, err := reconciler.GivenUpRedeliveries(ctx, e.pool, 100)
	if err != nil {
		return err
	}
	if err := printJSON(stdout, map[string]any{"round": rep, "checkpoints": cps, "given_up_redeliveries": given}); err != nil {
		return err
	}
	if rerr != nil {
		return fmt.Errorf("reconcile round had failed steps (see errors above): %w", rerr)
	}
	return nil
}
