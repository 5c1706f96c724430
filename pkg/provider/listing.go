package provider

import (
	"context"
	"errors"
	"time"
)

// Lister pages through a provider's resources. It must list every resource
// whatever its state: a list that leaves finished ones out (Stripe's
// subscriptions without status=all) hides exactly the cancellations whose
// webhook was lost.
type Lister interface {
	// ListObjects returns one page after startingAfter ("" first): each
	// resource's id and, when the lister can say, its status,
	// cancel-at-period-end and deletion.
	ListObjects(ctx context.Context, account, resourceType, startingAfter string, limit int) ([]Listed, bool, error)
}

// Listed is one object of a list page: what the reconciler compares with
// the projection.
type Listed struct {
	ID     string
	Status string
	// CancelAtPeriodEnd is nil when the object has no such field.
	CancelAtPeriodEnd *bool
	Deleted           bool
	// State is the object as listed, the same document the provider's
	// Fetcher returns for it (JSON), or nil when the lister cannot say:
	// the reconciler then has the processor write it instead of fetching
	// it again.
	State []byte
}

// ListedEvent is one event of a provider's events list: the same document
// the provider delivers as a webhook body.
type ListedEvent struct {
	ID   string
	At   time.Time
	Body []byte
}

// EventPage is one page of a provider's events list.
type EventPage struct {
	Events []ListedEvent
	// Next continues the walk (a Stripe event id, a Chargebee next_offset);
	// "" when this was the last page.
	Next string
}

// EventLister pages through a provider's events that occurred at or after
// since, in whatever order the provider lists them, from cursor ("" for the
// first page). The source's credentials are the lister's own.
type EventLister interface {
	ListEvents(ctx context.Context, since time.Time, cursor string, limit int) (EventPage, error)
}

// ErrCursorGone is what a Lister, EventLister or HookDeliveries wraps when
// the provider no longer knows the cursor it was given: Stripe lists events
// for 30 days and forgets deleted objects, GitHub lists 3 days of
// deliveries, Chargebee's next_offset ages out; a walk interrupted for
// longer resumes from a cursor that is gone. The walk then starts again
// from its lower bound.
var ErrCursorGone = errors.New("the provider no longer knows the listing cursor")

// ErrRedeliveryRefused is what HookDeliveries.Redeliver wraps when the
// provider refuses to redeliver that delivery for good (GitHub: 422 past
// its 3-day limit, 404 for a delivery it no longer knows): asking again
// cannot help, and the walk must not stop on it.
var ErrRedeliveryRefused = errors.New("the provider refuses to redeliver this delivery")

// HookDelivery is one delivery attempt of a webhook, as GitHub lists them
// (https://docs.github.com/en/rest/repos/webhooks#list-deliveries-for-a-repository-webhook).
type HookDelivery struct {
	ID int64
	// GUID is the X-GitHub-Delivery header: the event's identity, kept by
	// every redelivery of it.
	GUID        string
	StatusCode  int
	DeliveredAt time.Time
	Redelivery  bool
}

// OK reports whether the receiver answered 2xx.
func (d HookDelivery) OK() bool { return d.StatusCode >= 200 && d.StatusCode < 300 }

// HookDeliveries lists a hook's deliveries, newest first, and asks for a
// redelivery, for a provider that never redelivers on its own (GitHub).
type HookDeliveries interface {
	// ListDeliveries returns one page from cursor ("" first) and the cursor
	// of the next page ("" after the last).
	ListDeliveries(ctx context.Context, cursor string, limit int) ([]HookDelivery, string, error)
	// Redeliver asks the provider to send delivery id again.
	Redeliver(ctx context.Context, id int64) error
}

// Source is one endpoint whose provider data is reconciled: its resources
// listed (Lister), its events scanned (Events), its hook's deliveries
// walked (Hooks); any of them may be nil. A provider's Connection builds
// it from the endpoint; the reconciler walks it.
type Source struct {
	Provider      string
	SourceAccount string
	Environment   string
	ResourceType  string
	// APIAccount is sent to the provider API as the account to act for
	// (Stripe-Account), or "" for the API key's own account.
	APIAccount string
	// Lister reads the account with the source's own credentials. Nil: the
	// source's resources are not listed (its stale projections still are
	// re-checked when ResourceType is set).
	Lister Lister
	// Terminal are the statuses the provider never moves a resource out of
	// (Stripe: canceled, incomplete_expired). A stale projection in one of
	// them, or deleted, is not re-checked. Defaults to none: only deleted
	// projections are terminal.
	Terminal []string
	// More are further resource types of the account that Lister lists,
	// each walked after ResourceType with its own checkpoint and its own
	// terminal statuses (Stripe: customers and invoices, when the endpoint
	// projects them). Their stale projections are re-checked like
	// ResourceType's.
	More []Listing
	// Endpoint is the endpoint listed events are ingested under: its id,
	// account, environment and allow-list. Required with Events.
	Endpoint *Endpoint
	// Endpoints are every endpoint of the account and environment whose
	// events the scan covers, in config order: a listed event is ingested
	// under the first that accepts its type. Empty: Endpoint alone.
	Endpoints []*Endpoint
	// Listing identifies a listing that is per something narrower than the
	// account (GitHub: one hook's deliveries): sources of one account with
	// different listings are walked apart, with the same listing once.
	Listing string
	// Key tells apart the checkpoints of an account's sources when it has
	// more than one listing (its second hook on); "" for the first.
	Key string
	// Events lists the provider's events; nil: no events scan.
	Events EventLister
	// Identify reads a listed event's identity exactly as the endpoint's
	// adapter reads a delivery's. Required with Events.
	Identify Identifier
	// Hooks lists a hook's deliveries and asks for redeliveries (GitHub);
	// nil: none.
	Hooks HookDeliveries
}

// Listing is one more resource type a Source lists (Source.More).
type Listing struct {
	ResourceType string
	// Terminal are the type's statuses the provider never moves a
	// resource out of; as Source.Terminal.
	Terminal []string
}

// Listings are the source's resource types, ResourceType first, each as
// the source of that type alone; none when ResourceType is empty.
func (s Source) Listings() []Source {
	if s.ResourceType == "" {
		return nil
	}
	out := []Source{s}
	for _, l := range s.More {
		o := s
		o.ResourceType, o.Terminal, o.More = l.ResourceType, l.Terminal, nil
		out = append(out, o)
	}
	out[0].More = nil
	return out
}

// Name identifies the source in reconcile_checkpoint, reconcile_redelivery
// and reports: provider/account/environment, then /Key when set.
func (s Source) Name() string {
	n := s.Provider + "/" + s.SourceAccount + "/" + s.Environment
	if s.Key != "" {
		n += "/" + s.Key
	}
	return n
}

// Accepting is the endpoint a listed event of eventType is ingested
// under: the first of Endpoints (or Endpoint) that accepts it, or nil.
func (s Source) Accepting(eventType string) *Endpoint {
	if len(s.Endpoints) == 0 {
		if s.Endpoint != nil && s.Endpoint.Allows(eventType) {
			return s.Endpoint
		}
		return nil
	}
	for _, ep := range s.Endpoints {
		if ep.Allows(eventType) {
			return ep
		}
	}
	return nil
}
