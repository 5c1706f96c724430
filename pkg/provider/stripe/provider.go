package stripe

import (
	"fmt"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Provider is Stripe's adapter for package registry: Verifier's Verify and
// Identify, Interpret, and the API (Connect) and endpoint checks
// (CheckEndpoint) capabilities.
type Provider struct{ Verifier }

// Name implements provider.Provider.
func (Provider) Name() string { return provider.Stripe }

// EndpointKeys implements provider.EndpointChecker.
func (Provider) EndpointKeys() []string { return []string{"api_key", "stripe_account"} }

// CheckEndpoint implements provider.EndpointChecker.
func (Provider) CheckEndpoint(ep *provider.Endpoint) []error {
	var errs []error
	if ep.StripeAccount != "" && ep.StripeAccount != ep.SourceAccount {
		// The receiver accepts a Connect event only when its "account" is
		// the endpoint's source account; reading another account's API
		// would project data whose events this endpoint refuses.
		errs = append(errs, fmt.Errorf("stripe_account %q must equal source_account %q", ep.StripeAccount, ep.SourceAccount))
	}
	if err := CheckKeyMode(ep.APIKey, ep.Live()); err != nil {
		// A live key on a test endpoint would fetch live objects into the
		// test environment's projections (the processor refuses them, but
		// every event would die); say so at start.
		errs = append(errs, fmt.Errorf("api_key %w (environment %q)", err, ep.Environment))
	}
	for i, t := range ep.Project {
		if !Fetchable(t) {
			// Projecting a Stripe type means fetching it: one the client
			// cannot retrieve would fail every event of its type.
			errs = append(errs, fmt.Errorf("project[%d] %q is not a Stripe object hookyard can fetch (one of %s)", i, t, strings.Join(FetchableTypes(), ", ")))
		}
	}
	return errs
}

// Connect implements provider.Connector: one Client per distinct set of
// credentials of the Stripe endpoints (Accounts), at opts.BaseURL, each
// endpoint's api_key else opts.APIKey (STRIPE_API_KEY), the reconciler's
// reads inside opts.ReconcileRate (reconciler.stripe_rate).
func (Provider) Connect(eps []provider.Endpoint, opts provider.APIOptions) (provider.Connection, error) {
	accts, err := NewAccounts(APIConfig{BaseURL: opts.BaseURL, BackgroundRate: opts.ReconcileRate}, eps, opts.APIKey, opts.Log)
	if err != nil {
		return nil, err
	}
	return connection{accts: accts}, nil
}

type connection struct{ accts *Accounts }

// Fetcher reads every Stripe resource with its own endpoint's credentials.
func (c connection) Fetcher() provider.Fetcher { return Fetcher{Accounts: c.accts} }

// Source lists the endpoint's subscriptions (status=all), then the
// customers and invoices it projects (Listed), and scans its events, with
// its account's credentials; nil when it has none.
func (c connection) Source(ep *provider.Endpoint) (*provider.Source, error) {
	a, ok := c.accts.For(ep.SourceAccount, ep.Environment)
	if !ok {
		return nil, nil
	}
	var more []provider.Listing
	for _, t := range Listed {
		if ep.Projects(t.ResourceType, DefaultProject) {
			more = append(more, t)
		}
	}
	return &provider.Source{Provider: provider.Stripe, SourceAccount: ep.SourceAccount,
		Environment: ep.Environment, ResourceType: "subscription", APIAccount: a.StripeAccount, Lister: a.Client,
		Terminal: SubscriptionTerminal, More: more, Endpoint: ep, Identify: Verifier{},
		Events: Events{Client: a.Client, Account: a.StripeAccount, Types: EventTypes(ep.EventTypes)}}, nil
}

// Listed are the types besides subscriptions the reconciler lists when an
// endpoint projects them, with what each list leaves out:
//
//   - customers (GET /v1/customers, https://docs.stripe.com/api/customers/list):
//     a deleted customer is no longer listed, though GET /v1/customers/{id}
//     still answers it with "deleted": true
//     (https://docs.stripe.com/api/customers/delete). A deletion whose
//     webhook was lost is found by the events scan (customer.deleted, for
//     the 30 days Stripe lists events) and by the stale check, which
//     fetches every non-deleted customer projection not observed for
//     reconciler.stale_after, listed or not.
//   - invoices (GET /v1/invoices, https://docs.stripe.com/api/invoices/list):
//     every status unless status= is sent, newest first; a deleted draft
//     is gone for good (404). Paid and void invoices are final
//     (https://docs.stripe.com/invoicing/overview), so their projections
//     are not re-checked when stale, though a listing that differs still
//     checks them.
var Listed = []provider.Listing{
	{ResourceType: "customer"},
	{ResourceType: "invoice", Terminal: []string{"paid", "void"}},
}

// KnownEventTypes implements provider.EventTyper: the subscription and
// invoice events hookyard acts on or keys by their subscription
// (https://docs.stripe.com/api/events/types).
func (Provider) KnownEventTypes() []string {
	return []string{"customer.subscription.created", "customer.subscription.updated", "customer.subscription.deleted",
		"customer.subscription.paused", "customer.subscription.resumed", "customer.subscription.trial_will_end",
		"customer.subscription.pending_update_applied", "customer.subscription.pending_update_expired",
		"invoice.created", "invoice.finalized", "invoice.updated", "invoice.paid", "invoice.payment_succeeded",
		"invoice.payment_failed", "invoice.upcoming"}
}
