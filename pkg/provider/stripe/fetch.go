package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
)

// Fetcher reads current Stripe state with the credentials of the
// resource's own endpoint: its source account and environment choose the API
// key (and the Stripe-Account to act for), so that account B's projection is
// never fetched with account A's key.
//
// A 404 is returned as an error (the event is retried and, if it persists,
// dead): Stripe keeps canceled subscriptions retrievable, so a missing one is
// unexplained and must never become "canceled". A deleted object that Stripe
// reports as such ({"deleted": true}) becomes a tombstone. An object whose
// livemode is not the resource's environment is an error too, never a write.
type Fetcher struct {
	// Accounts holds each Stripe endpoint's credentials. A resource of an
	// account and environment it does not know fails; it is never read with
	// another endpoint's key.
	Accounts *Accounts
	// Client reads every resource, acting for the key's own account, when
	// Accounts is nil: one Stripe account, one key.
	Client *Client
}

// errNoCredentials: no Stripe endpoint names the resource's account and
// environment.
var errNoCredentials = errors.New("no Stripe API credentials for this source account and environment")

// Fetch implements provider.Fetcher.
func (f Fetcher) Fetch(ctx context.Context, r message.Resource) (provider.Fetched, error) {
	cl, stripeAccount := f.Client, ""
	if f.Accounts != nil {
		a, ok := f.Accounts.For(r.SourceAccount, r.Environment)
		if !ok {
			return provider.Fetched{}, fmt.Errorf("fetch stripe %s %s: %w (%s/%s)", r.Type, r.ID, errNoCredentials, r.SourceAccount, r.Environment)
		}
		cl, stripeAccount = a.Client, a.StripeAccount
	}
	// The client refuses objects of its own mode's opposite; this makes sure
	// its mode is the resource's environment, whoever built it.
	if cl.Live() != provider.IsLive(r.Environment) {
		return provider.Fetched{}, fmt.Errorf("fetch stripe %s %s: %w: the client reads live=%t data, the environment is %q",
			r.Type, r.ID, ErrLivemodeMismatch, cl.Live(), r.Environment)
	}
	body, err := cl.Get(ctx, stripeAccount, r.Type, r.ID)
	if errors.Is(err, ErrNotFound) {
		return provider.Fetched{}, fmt.Errorf("fetch stripe %s %s: %w: %w", r.Type, r.ID, provider.ErrNotFound, err)
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrLimited) {
		// The breaker or the limiter kept the request from Stripe.
		return provider.Fetched{}, fmt.Errorf("fetch stripe %s %s: %w: %w", r.Type, r.ID, provider.ErrNotAttempted, err)
	}
	if err != nil {
		return provider.Fetched{}, fmt.Errorf("fetch stripe %s %s: %w", r.Type, r.ID, err)
	}
	var s struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Deleted bool   `json:"deleted"`
	}
	if err := json.Unmarshal(body, &s); err != nil || s.ID != r.ID {
		return provider.Fetched{}, fmt.Errorf("fetch stripe %s %s: unexpected response", r.Type, r.ID)
	}
	return provider.Fetched{State: body, Status: s.Status, Deleted: s.Deleted}, nil
}
