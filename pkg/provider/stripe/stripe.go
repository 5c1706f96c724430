package stripe

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookyard/hookyard/pkg/provider"
)

// SignatureHeader is the header Stripe signs deliveries in.
const SignatureHeader = "Stripe-Signature"

// Verifier is the Stripe adapter.
type Verifier struct{}

type event struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Account  string `json:"account"`
	Livemode bool   `json:"livemode"`
	Created  int64  `json:"created"`
	Data     struct {
		Object struct {
			ID           string `json:"id"`
			Object       string `json:"object"`
			Subscription any    `json:"subscription"`
			Parent       struct {
				SubscriptionDetails struct {
					Subscription string `json:"subscription"`
				} `json:"subscription_details"`
			} `json:"parent"`
		} `json:"object"`
	} `json:"data"`
}

// Verify checks the Stripe-Signature header against every secret of the
// endpoint (several during a rotation) and reads the event. API versions are
// not checked: the stored payload is kept whatever version sent it.
func (Verifier) Verify(ep *provider.Endpoint, h http.Header, body []byte, now time.Time) (provider.Event, error) {
	sig := h.Get(SignatureHeader)
	if sig == "" {
		return provider.Event{}, fmt.Errorf("%w: no %s header", provider.ErrUnauthenticated, SignatureHeader)
	}
	parsed, err := parseSignature(sig)
	if err != nil {
		return provider.Event{}, err
	}
	tol := ep.Tolerance
	if tol <= 0 {
		tol = webhook.DefaultTolerance
	}
	// The signature first, the timestamp after: stripe-go judges the age
	// before the signature, so an unsigned request with an old t= would be
	// answered stale_signature (and counted as such) instead of 401.
	ok := false
	var verr error
	for _, secret := range ep.Secrets {
		if verr = webhook.ValidatePayloadIgnoringTolerance(body, sig, secret); verr == nil {
			ok = true
			break
		}
	}
	if !ok {
		return provider.Event{}, fmt.Errorf("%w: %v", provider.ErrUnauthenticated, verr)
	}
	// The timestamp is signed, so it is judged now: too old is a replay,
	// and one far in the future (which stripe-go does not refuse) would
	// stay replayable until the clock caught up with it.
	if age := now.Sub(parsed.at); age > tol {
		return provider.Event{}, fmt.Errorf("%w: %v", provider.ErrStaleSignature, webhook.ErrTooOld)
	} else if -age > tol {
		return provider.Event{}, fmt.Errorf("%w: timestamp %s is %s in the future", provider.ErrStaleSignature,
			parsed.at.UTC().Format(time.RFC3339), (-age).Round(time.Second))
	}
	return Verifier{}.Identify(ep, body, now)
}

// Identify reads an event whose authenticity is already established: a
// verified delivery, or an event the API returned to the endpoint's own
// credentials (the reconciler's events scan). Both read identity here, so
// an event ingested from the API and its later delivery are one event.
func (Verifier) Identify(ep *provider.Endpoint, body []byte, _ time.Time) (provider.Event, error) {
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		return provider.Event{}, fmt.Errorf("%w: %v", provider.ErrMalformed, err)
	}
	// One reading of the body everywhere: livemode and the resource read
	// here must be what the stored document says to every later reader.
	if err := provider.CheckUniqueKeys(body); err != nil {
		return provider.Event{}, err
	}
	if ev.ID == "" || ev.Type == "" {
		return provider.Event{}, fmt.Errorf("%w: event has no id or type", provider.ErrMalformed)
	}
	if ev.Livemode != ep.Live() {
		return provider.Event{}, fmt.Errorf("%w: livemode=%t on a %s endpoint", provider.ErrScope, ev.Livemode, ep.Environment)
	}
	if ev.Account != "" && ev.Account != ep.SourceAccount {
		return provider.Event{}, fmt.Errorf("%w: event for another account", provider.ErrScope)
	}
	out := provider.Event{ID: ev.ID, Type: ev.Type, Payload: body, ValidJSON: true}
	if ev.Created > 0 {
		out.OccurredAt = time.Unix(ev.Created, 0).UTC()
	}
	out.ResourceType, out.ResourceID = resourceOf(&ev, ep)
	return out, nil
}

// resourceOf names the resource whose partition the event goes to: the
// object the event is about. An invoice of a subscription is keyed by
// itself when the endpoint projects invoices (its projection is then
// written by its own partition, in sequence, and its subscription is
// refreshed by a check the processor sends: Interpret's Refresh), and by
// its subscription otherwise, as before invoices were projected, so that
// the event refreshes the subscription.
func resourceOf(ev *event, ep *provider.Endpoint) (string, string) {
	obj := ev.Data.Object
	switch {
	case strings.HasPrefix(ev.Type, "customer.subscription."):
		return "subscription", obj.ID
	case obj.Object == "invoice":
		if s := invoiceSubscription(ev); s != "" && !ep.Projects("invoice", DefaultProject) {
			return "subscription", s
		}
		return "invoice", obj.ID
	case obj.Object != "" && obj.ID != "":
		return obj.Object, obj.ID
	}
	return "", ""
}

// invoiceSubscription is the subscription an invoice event's object
// belongs to: "subscription" (an id, or the object expanded) before the
// basil API version, parent.subscription_details.subscription since
// (https://docs.stripe.com/api/invoices/object).
func invoiceSubscription(ev *event) string {
	obj := ev.Data.Object
	if s, ok := obj.Subscription.(string); ok && s != "" {
		return s
	}
	if m, ok := obj.Subscription.(map[string]any); ok {
		if s, _ := m["id"].(string); s != "" {
			return s
		}
	}
	return obj.Parent.SubscriptionDetails.Subscription
}

// Sign returns a Stripe-Signature header value for body, as Stripe computes
// it. The simulator and tests use it.
func Sign(body []byte, secret string, t time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: t}).Header
}
