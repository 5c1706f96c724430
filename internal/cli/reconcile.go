package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/pkg/provider/registry"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/reconciler"
)

// reconcileSources are the reconciler's sources: per Stripe account its
// subscriptions (status=all) and its events, each with its endpoint's
// credentials; per Chargebee endpoint with an API key and a site its
// events; per GitHub endpoint with a hook its deliveries.
func (e *env) reconcileSources(stripeBase string) ([]reconciler.Source, error) {
	accts, err := e.stripeAccounts(stripeBase)
	if err != nil {
		return nil, err
	}
	rc := e.cfg.Reconcile
	var sources []reconciler.Source
	for i := range e.cfg.Endpoints {
		ep := &e.cfg.Endpoints[i]
		if sourceListed(sources, ep) {
			continue // endpoints sharing a provider, account and environment are one source, one checkpoint
		}
		switch ep.Provider {
		case provider.Stripe:
			a, ok := accts.For(ep.SourceAccount, ep.Environment)
			if !ok {
				continue
			}
			sources = append(sources, reconciler.Source{Provider: provider.Stripe, SourceAccount: ep.SourceAccount,
				Environment: ep.Environment, ResourceType: "subscription", APIAccount: a.StripeAccount, Lister: a.Client,
				Terminal: stripe.SubscriptionTerminal, Endpoint: ep, Identify: registry.Identifier(ep.Provider),
				Events: reconciler.StripeEvents{Client: a.Client, Account: a.StripeAccount, Types: reconciler.StripeEventTypes(ep.EventTypes)}})
		case provider.Chargebee:
			site := cmp.Or(ep.Site, e.devSites[ep.ID])
			if ep.APIKey == "" || site == "" {
				if ep.APIKey != "" {
					e.log.Warn("chargebee endpoint has an api_key but no site: its events are not scanned", slog.String("endpoint", ep.ID))
				}
				continue
			}
			cl, err := chargebee.NewClient(chargebee.APIConfig{Site: site, APIKey: ep.APIKey, RatePerSecond: rc.ChargebeeRate}, e.log)
			if err != nil {
				return nil, fmt.Errorf("endpoint %q: %w", ep.ID, err)
			}
			sources = append(sources, reconciler.Source{Provider: provider.Chargebee, SourceAccount: ep.SourceAccount,
				Environment: ep.Environment, Endpoint: ep, Identify: registry.Identifier(ep.Provider),
				Events: reconciler.ChargebeeEvents{Client: cl}})
		case provider.GitHub:
			if ep.GitHubHook == nil {
				continue
			}
			cl, err := github.NewClient(github.APIConfig{BaseURL: cmp.Or(e.cfg.GitHubAPIBase, e.githubBase), RatePerSecond: rc.GitHubRate},
				*ep.GitHubHook, e.log)
			if err != nil {
				return nil, fmt.Errorf("endpoint %q: %w", ep.ID, err)
			}
			sources = append(sources, reconciler.Source{Provider: provider.GitHub, SourceAccount: ep.SourceAccount,
				Environment: ep.Environment, Endpoint: ep, Hooks: reconciler.GitHubHook{Client: cl}})
		}
	}
	return sources, nil
}

func sourceListed(sources []reconciler.Source, ep *provider.Endpoint) bool {
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
	if err := printJSON(stdout, map[string]any{"round": rep, "checkpoints": cps}); err != nil {
		return err
	}
	if rerr != nil {
		return fmt.Errorf("reconcile round had failed steps (see errors above): %w", rerr)
	}
	return nil
}
