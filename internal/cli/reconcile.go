package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/reconciler"
)

// reconcileSources are the reconciler's sources, in config order. The
// endpoints of one provider, account and environment share one source, one
// checkpoint per listing and one quota (Stripe: the account's subscriptions
// and its events, listed with types[] covering every endpoint's allow-list
// and each event filed under the endpoint that accepts it; Chargebee: the
// site's events), except listings that are per hook (GitHub): one source per
// distinct hook, the account's first keeping the account's checkpoint.
func (e *env) reconcileSources(stripeBase string) ([]provider.Source, error) {
	conns, err := e.connections(stripeBase)
	if err != nil {
		return nil, err
	}
	type account struct{ provider, account, environment string }
	var sources []provider.Source
	main := map[account]int{} // index of the account's shared source
	eps := map[account][]*provider.Endpoint{}
	hooks := map[account][]string{} // listings already walked, first first
	for i := range e.cfg.Endpoints {
		ep := &e.cfg.Endpoints[i]
		conn := conns[ep.Provider]
		if conn == nil {
			continue
		}
		src, err := conn.Source(ep)
		if err != nil {
			return nil, fmt.Errorf("endpoint %q: %w", ep.ID, err)
		}
		if src == nil {
			continue
		}
		a := account{ep.Provider, ep.SourceAccount, ep.Environment}
		if src.Listing != "" {
			if slices.Contains(hooks[a], src.Listing) {
				continue // another endpoint of the same hook: one walk, one quota
			}
			if len(hooks[a]) > 0 {
				src.Key = src.Listing
			}
			hooks[a] = append(hooks[a], src.Listing)
			sources = append(sources, *src)
			continue
		}
		eps[a] = append(eps[a], ep)
		if _, ok := main[a]; !ok {
			main[a] = len(sources)
			sources = append(sources, *src)
		}
	}
	for a, i := range main {
		if len(eps[a]) < 2 {
			continue
		}
		// Built again for an endpoint that accepts what any of them does,
		// so that what the provider is asked to list (Stripe's types[])
		// covers them all; events are still filed per endpoint.
		union := *eps[a][0]
		union.EventTypes = unionTypes(eps[a])
		src, err := conns[a.provider].Source(&union)
		if err != nil {
			return nil, fmt.Errorf("endpoint %q: %w", union.ID, err)
		}
		src.Endpoint, src.Endpoints = eps[a][0], eps[a]
		sources[i] = *src
	}
	return sources, nil
}

// unionTypes is the allow-list of an endpoint accepting what any of eps
// does: nil (everything) when one of them accepts everything.
func unionTypes(eps []*provider.Endpoint) []string {
	var out []string
	for _, ep := range eps {
		if len(ep.EventTypes) == 0 {
			return nil
		}
		for _, t := range ep.EventTypes {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
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
