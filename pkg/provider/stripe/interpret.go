package stripe

import (
	"encoding/json"
	"fmt"

	"github.com/hookyard/hookyard/pkg/provider"
)

// DefaultProject is what a Stripe endpoint projects when its `project`
// names nothing: subscriptions, as before any other type was projected.
// Every projected type costs one API call per event (Stripe sends no
// version, so each event is a hint to fetch), out of the account's quota.
var DefaultProject = []string{"subscription"}

// Interpret implements provider.Interpreter. Every event about a resource
// of a type the endpoint projects (ep.Project, else DefaultProject) is a
// hint to fetch, since Stripe sends no version. Facts (an invoice paid)
// are declared, not read here: see FactObject.
func (Provider) Interpret(ev provider.StoredEvent, ep *provider.Endpoint) (provider.Plan, error) {
	var doc event
	if err := json.Unmarshal(ev.Payload, &doc); err != nil {
		return provider.Plan{}, fmt.Errorf("%w: %v", provider.ErrMalformed, err)
	}
	var p provider.Plan
	// Stripe sends no version: every event about a projected resource is a
	// hint. A type the client has no path for is never fetched (config
	// refuses it in project; an endpoint the config lost keeps the default).
	if ev.ResourceID != "" && ep.Projects(ev.ResourceType, DefaultProject) && Fetchable(ev.ResourceType) {
		p.Fetch = true
	}
	// An invoice keyed by itself (its endpoint projects invoices) still
	// says its subscription changed (paid, payment failed: the
	// subscription's status follows), as it did when it was keyed by the
	// subscription: the subscription is refreshed by a check on its own
	// key, never written from the invoice's partition.
	if ev.ResourceType == "invoice" && doc.Data.Object.Object == "invoice" && ep.Projects("subscription", DefaultProject) {
		if s := invoiceSubscription(&doc); s != "" {
			p.Refresh = append(p.Refresh, provider.ResourceRef{Type: "subscription", ID: s})
		}
	}
	return p, nil
}

// FactObject implements provider.FactObjecter: a Stripe event's object is
// data.object.
func (Provider) FactObject(provider.StoredEvent) string { return "data.object" }
