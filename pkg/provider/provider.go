// Package provider owns the contract between hookyard's services and the
// adapters, one package per provider under pkg/provider: the Endpoint, what
// an adapter must do (Provider: verify, interpret) and what it may offer
// (Identifier, Connector with its Fetcher and reconciler Sources,
// EndpointChecker, MediaTypeAccepter, DevSimulator), and the types those speak (Event, Plan,
// Fetched, Listed, ListedEvent, HookDelivery). The services name no
// provider; they loop over these.
//
// An adapter must verify the delivery over the raw bytes before it reads
// anything from the body, and it must never let the body choose the provider,
// source account or environment: those come from the Endpoint alone. This
// package must never import an adapter: package registry lists them.
package provider

import (
	"errors"
	"net/http"
	"time"
)

// Provider names as they appear in config, keys and tables, for the
// providers hookyard ships. A new provider declares its name in its own
// package (Provider.Name); it needs no constant here.
const (
	Stripe           = "stripe"
	Chargebee        = "chargebee"
	GitHub           = "github"
	StandardWebhooks = "standard-webhooks"
)

// Sentinel errors an adapter returns; the receiver maps each to an HTTP status
// and a machine-readable code. Wrap them with %w to add detail.
var (
	// ErrUnauthenticated: missing or wrong credentials or signature (401).
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrStaleSignature: the signature's timestamp is outside the tolerance (400).
	ErrStaleSignature = errors.New("signature timestamp outside tolerance")
	// ErrMalformed: authenticated, but the body is not an event we can read (400).
	ErrMalformed = errors.New("malformed event")
	// ErrVersionFromFuture: authenticated, but the event's version lies
	// further in the future than the endpoint's version_skew allows (or,
	// for a version that is not a time, above MaxPlainVersion). The
	// event is returned with the error and kept dead, never applied: one
	// forged or broken snapshot must not pin a projection (400, kept).
	ErrVersionFromFuture = errors.New("version from the future")
	// ErrScope: authenticated, but the event belongs to another account or
	// environment than the endpoint owns, e.g. a live event on a test endpoint (403).
	ErrScope = errors.New("event outside endpoint scope")
)

// Endpoint is one configured webhook URL: POST /webhooks/{ID}. Everything that
// decides whose data an event is comes from here.
type Endpoint struct {
	// ID is the path segment of the webhook URL.
	ID string `yaml:"id"`
	// Provider is one of Stripe, Chargebee, GitHub, StandardWebhooks.
	Provider string `yaml:"provider"`
	// SourceAccount is the provider account the endpoint belongs to.
	SourceAccount string `yaml:"source_account"`
	// Environment is e.g. "test" or "live"/"prod".
	Environment string `yaml:"environment"`
	// Secrets holds every secret accepted at once, so secrets can rotate.
	// For Chargebee each entry is "username:password".
	Secrets []string `yaml:"secrets"`
	// EventTypes is the allow-list; an event outside it is acknowledged and
	// recorded as ignored. Empty means every type. A trailing "*" matches a prefix.
	EventTypes []string `yaml:"event_types"`
	// Tolerance bounds the age of signature timestamps. Defaults to 300s.
	Tolerance time.Duration `yaml:"tolerance"`
	// BodyLimit caps this endpoint's deliveries in bytes; larger ones get
	// 413. Defaults to receiver.body_limit (1 MiB), and to 25 MiB for GitHub,
	// which sends up to 25 MB.
	BodyLimit int64 `yaml:"body_limit"`
	// VersionSkew bounds how far in the future a version that is a time
	// (Chargebee's resource_version, in milliseconds; a Standard Webhooks
	// version with paths.version_is_time_ms) may lie. Defaults to 24h.
	VersionSkew time.Duration `yaml:"version_skew"`
	// StoreRaw keeps the raw body bytes beside the parsed payload. Defaults to false.
	StoreRaw bool `yaml:"store_raw"`
	// Incremental declares that events carry deltas rather than snapshots, so a
	// gap in versions parks the resource instead of applying. Defaults to false.
	Incremental bool `yaml:"incremental"`
	// Paths locate the event's fields in the body for StandardWebhooks
	// endpoints (dot-separated JSON paths).
	Paths Paths `yaml:"paths"`
	// APIKey is the secret key the processor and the reconciler read this
	// endpoint's resources with, e.g. "${STRIPE_API_KEY_ACCT_X}". Stripe:
	// defaults to the global STRIPE_API_KEY. Chargebee: the site's API key
	// the reconciler lists events with (with Site); defaults to none, no
	// events scan.
	APIKey string `yaml:"api_key"`
	// Site is a Chargebee site's API base URL, e.g.
	// "https://acme-test.chargebee.com" (Chargebee only). Defaults to
	// empty: no events scan (in `hookyard dev`, its simulator).
	Site string `yaml:"site"`
	// GitHubHook names the GitHub webhook that delivers to this endpoint
	// (GitHub only), so the reconciler can list its deliveries and ask for
	// the failed ones again. Defaults to none.
	GitHubHook *GitHubHook `yaml:"github_hook"`
	// StripeAccount is the connected account the API calls act for
	// (Stripe Connect: sent as Stripe-Account), usually equal to
	// SourceAccount. Defaults to empty: the API key's own account.
	StripeAccount string `yaml:"stripe_account"`
	// Project names the resource types whose events this endpoint projects
	// (e.g. [subscription, customer, invoice]); an event about any other
	// type is stored and recorded, and changes no projection. Defaults to
	// the provider's choice: Stripe [subscription] (every other type costs
	// an API call per event), every type a versioned provider snapshots
	// (Chargebee, Standard Webhooks).
	Project []string `yaml:"project"`
	// Fetch is where a Standard Webhooks sender serves a resource's current
	// state (Standard Webhooks only). With it, an event without a version
	// is a hint the processor fetches from there. Defaults to none: such an
	// event is recorded.
	Fetch *FetchAPI `yaml:"fetch"`
}

// FetchAPI is a sender's API that serves one resource's current state:
// GET URL with {type} and {id} replaced.
type FetchAPI struct {
	// URL is the resource's address, with {id} (required) and {type}
	// replaced, e.g. "https://api.sender.example/v1/{type}s/{id}". It must be
	// https, or plain http to a loopback host, outside `hookyard dev`.
	URL string `yaml:"url"`
	// TokenEnv names the environment variable holding the API token. It
	// must be set when the process starts.
	TokenEnv string `yaml:"token_env"`
	// Header is the header the token is sent in: "Authorization" (the
	// default) sends "Bearer <token>", any other header the token alone.
	Header string `yaml:"header"`
	// Rate is the calls per second the process allows itself with this
	// token. Defaults to 10.
	Rate float64 `yaml:"rate"`
	// Burst is the size of the rate limiter's bucket. Defaults to Rate,
	// at least 1.
	Burst int `yaml:"burst"`
	// State is the dotted path of the resource in the answer. Defaults to
	// the whole body.
	State string `yaml:"state"`
	// Status is the dotted path, inside the state, of its status. Defaults
	// to "status".
	Status string `yaml:"status"`
	// Deleted is the dotted path, inside the state, of a boolean that marks
	// the resource deleted (a tombstone). Defaults to "deleted". A 404 is
	// never a deletion: it is retried, then dead.
	Deleted string `yaml:"deleted"`
}

// Projects reports whether ep projects resources of type t: the types its
// Project names, or byDefault when it names none (byDefault nil: every
// type). A nil ep (an endpoint the config no longer names) is judged by
// byDefault.
func (e *Endpoint) Projects(t string, byDefault []string) bool {
	list := byDefault
	if e != nil && e.Project != nil {
		list = e.Project
	} else if byDefault == nil {
		return true
	}
	for _, p := range list {
		if p == t {
			return true
		}
	}
	return false
}

// Paths are dot-separated JSON paths into a Standard Webhooks payload.
type Paths struct {
	// EventType defaults to "type".
	EventType string `yaml:"event_type"`
	// ResourceID is required for events that touch a resource, e.g. "data.id".
	ResourceID string `yaml:"resource_id"`
	// ResourceType is a path; when empty ResourceTypeValue is used.
	ResourceType string `yaml:"resource_type"`
	// ResourceTypeValue is a constant resource type. Defaults to "subscription".
	ResourceTypeValue string `yaml:"resource_type_value"`
	// Version is optional; when set the event is a versioned snapshot.
	// A version above 2^53 is refused (kept dead): no JSON sender can be
	// relied on to write a larger integer exactly, and one such version
	// would pin the projection. Defaults to none.
	Version string `yaml:"version"`
	// VersionIsTimeMs declares that the version is a time in milliseconds
	// since the epoch, so the endpoint's version_skew bounds it as it
	// bounds Chargebee's resource_version. Defaults to false.
	VersionIsTimeMs bool `yaml:"version_is_time_ms"`
	// Deleted is an optional path to a boolean that marks a deletion.
	Deleted string `yaml:"deleted"`
	// State is the path of the resource snapshot. Defaults to "data".
	State string `yaml:"state"`
}

// Live reports whether the endpoint receives production traffic.
func (e *Endpoint) Live() bool { return IsLive(e.Environment) }

// IsLive reports whether environment names production: "live", "prod" or
// "production"; every other name ("test", "staging", ...) is a test
// environment. Stripe's livemode must equal it, on events and on the
// objects the API returns.
func IsLive(environment string) bool {
	switch environment {
	case "live", "prod", "production":
		return true
	}
	return false
}

// Allows reports whether the endpoint's allow-list admits eventType.
func (e *Endpoint) Allows(eventType string) bool {
	return len(e.EventTypes) == 0 || matchType(e.EventTypes, eventType) != ""
}

// matchType returns the first entry of patterns that admits eventType
// (an exact name, "*", or a prefix ending in "*"); "" when none does.
func matchType(patterns []string, eventType string) string {
	for _, t := range patterns {
		if t == eventType || t == "*" {
			return t
		}
		if n := len(t); n > 0 && t[n-1] == '*' && len(eventType) >= n-1 && eventType[:n-1] == t[:n-1] {
			return t
		}
	}
	return ""
}

// OtherEventType is the metric label of every event type that no
// configuration names.
const OtherEventType = "other"

// TypeLabel is the label a metric counts an event of eventType under:
// the endpoint's allow-list entry that admits it (the pattern, for a
// pattern), else, without an allow-list, the provider's known entry
// (EventTyper), else OtherEventType. A sender chooses its event types;
// a label must not let it choose how many series a metric has. ep may be
// nil (an endpoint no longer configured).
func TypeLabel(ep *Endpoint, known []string, eventType string) string {
	if ep != nil && len(ep.EventTypes) > 0 {
		known = ep.EventTypes
	}
	if t := matchType(known, eventType); t != "" {
		return t
	}
	return OtherEventType
}

// EventTyper is what an adapter may offer: the event types it knows, in
// the allow-list's syntax (a trailing "*" matches a prefix). Metrics count
// events of other types under OtherEventType.
type EventTyper interface {
	KnownEventTypes() []string
}

// Event is what an adapter read from a verified delivery.
type Event struct {
	// ID is the provider's event id: with the endpoint's provider, account and
	// environment it is the event's identity.
	ID string
	// Type is the provider's event type, e.g. "customer.subscription.updated".
	Type string
	// ResourceType and ResourceID name the resource the event is about; they
	// form the Kafka key and the projection key. Empty when the event is about
	// no resource we track.
	ResourceType string
	ResourceID   string
	// Version is the resource's version when the provider sends one.
	Version *int64
	// Payload is the body as JSON.
	Payload []byte
	// OccurredAt is when the provider says the event happened (Stripe
	// "created", Chargebee "occurred_at", Standard Webhooks "timestamp");
	// zero when the payload does not say.
	OccurredAt time.Time
	// ValidJSON: the adapter decoded Payload with json.Unmarshal, which
	// validates the whole document, so intake need not validate it again.
	ValidJSON bool
}

// Verifier verifies one delivery for an endpoint and reads its event.
type Verifier interface {
	Verify(ep *Endpoint, h http.Header, body []byte, now time.Time) (Event, error)
}

// Identifier reads the identity of an event whose authenticity is already
// established, exactly as Verify reads a verified delivery's: the events a
// provider's API lists (to the endpoint's own credentials) are ingested with
// it, so a later delivery of the same event is a duplicate. Like Verify it
// never takes account or environment from the body.
type Identifier interface {
	Identify(ep *Endpoint, body []byte, now time.Time) (Event, error)
}

// GitHubHook names one GitHub webhook: a repository's (Repo "owner/name")
// or an organization's (Org) hook HookID, read with Token; or a GitHub
// App's webhook (AppID and PrivateKey, nothing else: an App has one).
type GitHubHook struct {
	// Repo is "owner/name" of a repository hook.
	Repo string `yaml:"repo"`
	// Org is the organization's login of an organization hook.
	Org string `yaml:"org"`
	// HookID is the hook's id (the number in its settings URL).
	HookID int64 `yaml:"hook_id"`
	// Token is the API token, with admin:repo_hook (or admin:org_hook),
	// e.g. "${GITHUB_TOKEN}".
	Token string `yaml:"token"`
	// AppID is a GitHub App's id (or client id): the hook is the App's own
	// webhook, listed with a token signed by PrivateKey.
	AppID string `yaml:"app_id"`
	// PrivateKey is the App's private key, PEM, e.g.
	// "${file:/run/secrets/github-app.pem}".
	PrivateKey string `yaml:"private_key"`
}
