package provider

import (
	"log/slog"
	"net/http"
)

// Provider is one provider's adapter: everything hookyard needs to take its
// webhooks in. Verify reads a delivery, Interpret says what the stored event
// asks of the processor.
//
// Whatever else a provider can do is an optional capability, discovered by
// type assertion the way io.Copy discovers io.WriterTo:
//   - Identifier: its API lists events, read as Verify reads a delivery.
//   - Connector: hookyard reads its API (the processor's Fetcher, the
//     reconciler's Sources).
//   - EndpointChecker: its endpoints have settings to validate at start.
//   - MediaTypeAccepter: it delivers in media types besides JSON (GitHub's
//     forms); the receiver asks it before reading a body.
//
// Package registry lists every Provider once; nothing else names one.
type Provider interface {
	// Name is the provider's name as config, keys and tables spell it,
	// e.g. "stripe". It never changes: it is part of every stored identity.
	Name() string
	Verifier
	Interpreter
}

// Connector is the capability of a provider whose API hookyard reads.
type Connector interface {
	// Connect builds the process's access to the provider's API for the
	// endpoints of eps that are this provider's (it ignores the others).
	// It is called once per process, so the processor's fetches and the
	// reconciler's reads share each set of credentials' rate limiter and
	// breaker.
	Connect(eps []Endpoint, opts APIOptions) (Connection, error)
}

// APIOptions are what the process's config says about one provider's API.
// Each provider documents which of them it reads.
type APIOptions struct {
	// BaseURL is the API root (STRIPE_API_BASE, GITHUB_API_BASE, or a
	// `hookyard dev` simulator's). Defaults to the provider's own.
	BaseURL string
	// EndpointBase is an API root per endpoint id for providers whose API
	// lives at a per-account address (a Chargebee site), used when the
	// endpoint names none: `hookyard dev`'s simulators. Defaults to none.
	EndpointBase map[string]string
	// APIKey is the key of endpoints that name none (STRIPE_API_KEY).
	// Defaults to none.
	APIKey string
	// ReconcileRate is the reconciler's share of each account's quota, in
	// calls per second (reconciler.<provider>_rate). Defaults to the
	// provider's.
	ReconcileRate float64
	// Log receives the clients' warnings.
	Log *slog.Logger
}

// Connection is one process's access to a provider's API.
type Connection interface {
	// Fetcher reads a resource's current state for the processor; nil
	// when the processor never reads this provider's API.
	Fetcher() Fetcher
	// Source is what the reconciler walks for ep, with ep's own
	// credentials; nil when ep has nothing to reconcile (no credentials,
	// no hook).
	Source(ep *Endpoint) (*Source, error)
}

// EndpointChecker is the capability of a provider whose endpoints have
// settings of their own.
type EndpointChecker interface {
	// EndpointKeys are the provider-specific endpoint keys it reads, among
	// ProviderKeys (e.g. "api_key", "site"). Any other of them set on its
	// endpoint is an error: it would be silently unused.
	EndpointKeys() []string
	// CheckEndpoint returns every problem of ep's settings, each error's
	// text starting with the key at fault, e.g. `secrets[0] must be ...`.
	CheckEndpoint(ep *Endpoint) []error
}

// ProviderKeys are the endpoint keys only some providers read, in the order
// config reports them, with whether ep sets each.
func ProviderKeys(ep *Endpoint) []KeySet {
	return []KeySet{
		{"site", ep.Site != ""},
		{"github_hook", ep.GitHubHook != nil},
		{"api_key", ep.APIKey != ""},
		{"stripe_account", ep.StripeAccount != ""},
		{"fetch", ep.Fetch != nil},
	}
}

// KeySet is an endpoint key and whether an endpoint sets it.
type KeySet struct {
	Key string
	Set bool
}

// DevSimulator is the capability of standing in for a provider's API in
// `hookyard dev`. It lives in the provider's simulator package (which
// imports the provider to sign its webhooks), so the registry pairs it with
// its Provider.
type DevSimulator interface {
	// Simulate returns a simulator of the API for eps (the whole config's
	// endpoints: it picks its provider's), or nil when none of them needs
	// one. It is only called when the process has no API root of its own
	// for the provider (APIOptions.BaseURL).
	Simulate(eps []Endpoint, opts DevOptions) *Simulation
}

// DevOptions are what a simulator needs to know about the process.
type DevOptions struct {
	// WebhookBase is the receiver's root, e.g. "http://127.0.0.1:8080":
	// the simulator delivers to WebhookBase + "/webhooks/" + endpoint id.
	WebhookBase string
	// APIKey is the key of endpoints that name none (APIOptions.APIKey).
	APIKey string
}

// Simulation is one provider's API simulator, served beside the others on
// the dev simulator address.
type Simulation struct {
	Handler http.Handler
	// Root serves Handler at "/" rather than under "/<provider name>/":
	// for an API whose base URL can have no path (Stripe's, so that any
	// Stripe-compatible server can stand in).
	Root bool
	// Endpoints are the ids of the endpoints whose API root
	// (APIOptions.EndpointBase) the simulator is; nil when it is the
	// provider's (APIOptions.BaseURL).
	Endpoints []string
}

// SourceFunc is the Connection of a provider whose API only the reconciler
// reads (the processor fetches nothing from it), like http.HandlerFunc:
// the function builds an endpoint's Source.
type SourceFunc func(ep *Endpoint) (*Source, error)

// Fetcher implements Connection: none.
func (SourceFunc) Fetcher() Fetcher { return nil }

// Source implements Connection.
func (f SourceFunc) Source(ep *Endpoint) (*Source, error) { return f(ep) }
