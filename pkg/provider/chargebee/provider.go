package chargebee

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Provider is Chargebee's adapter for package registry: Verifier's Verify
// and Identify, Interpret, and the API (Connect) and endpoint checks
// (CheckEndpoint) capabilities.
type Provider struct{ Verifier }

// Name implements provider.Provider.
func (Provider) Name() string { return provider.Chargebee }

// EndpointKeys implements provider.EndpointChecker.
func (Provider) EndpointKeys() []string { return []string{"site", "api_key"} }

// CheckEndpoint implements provider.EndpointChecker: every secret is
// "username:password" (an empty one the config reports on its own).
func (Provider) CheckEndpoint(ep *provider.Endpoint) []error {
	var errs []error
	for j, s := range ep.Secrets {
		if s == "" || s == ":" {
			continue
		}
		if user, pass, hasColon := strings.Cut(s, ":"); !hasColon || user == "" || pass == "" {
			errs = append(errs, fmt.Errorf("secrets[%d] must be \"username:password\" with both parts set (is a variable unset?)", j))
		}
	}
	return errs
}

// Connect implements provider.Connector. The processor reads nothing from
// Chargebee (its events carry versioned snapshots); the reconciler scans
// the events of each endpoint with an api_key and a site (else
// opts.EndpointBase's, `hookyard dev`'s simulator), at
// opts.ReconcileRate (reconciler.chargebee_rate).
func (Provider) Connect(_ []provider.Endpoint, opts provider.APIOptions) (provider.Connection, error) {
	return provider.SourceFunc(func(ep *provider.Endpoint) (*provider.Source, error) {
		site := cmp.Or(ep.Site, opts.EndpointBase[ep.ID])
		if ep.APIKey == "" || site == "" {
			if ep.APIKey != "" && opts.Log != nil {
				opts.Log.Warn("chargebee endpoint has an api_key but no site: its events are not scanned", slog.String("endpoint", ep.ID))
			}
			return nil, nil
		}
		cl, err := NewClient(APIConfig{Site: site, APIKey: ep.APIKey, RatePerSecond: opts.ReconcileRate}, opts.Log)
		if err != nil {
			return nil, err
		}
		return &provider.Source{Provider: provider.Chargebee, SourceAccount: ep.SourceAccount,
			Environment: ep.Environment, Endpoint: ep, Identify: Verifier{}, Events: Events{Client: cl}}, nil
	}), nil
}

// KnownEventTypes implements provider.EventTyper: the subscription,
// invoice, payment and customer events of Chargebee's event list
// (https://apidocs.chargebee.com/docs/api/events#event_types) that carry
// the objects hookyard projects.
func (Provider) KnownEventTypes() []string {
	return []string{"subscription_created", "subscription_started", "subscription_activated", "subscription_changed",
		"subscription_cancelled", "subscription_reactivated", "subscription_renewed", "subscription_paused",
		"subscription_resumed", "subscription_deleted", "subscription_cancellation_scheduled",
		"subscription_scheduled_cancellation_removed", "subscription_changes_scheduled",
		"invoice_generated", "invoice_updated", "payment_succeeded", "payment_failed",
		"customer_created", "customer_changed", "customer_deleted"}
}
