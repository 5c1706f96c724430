package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/stripeapi"
)

// StripeFetcher reads current Stripe state. A 404 is returned as an error
// (the event is retried and, if it persists, dead): Stripe keeps canceled
// subscriptions retrievable, so a missing one is unexplained and must never
// become "canceled". A deleted object that Stripe reports as such
// ({"deleted": true}) becomes a tombstone.
type StripeFetcher struct {
	Client *stripeapi.Client
}

// Fetch implements Fetcher.
func (f StripeFetcher) Fetch(ctx context.Context, r message.Resource) (Fetched, error) {
	body, err := f.Client.Get(ctx, "", r.Type, r.ID)
	if errors.Is(err, stripeapi.ErrNotFound) {
		return Fetched{}, fmt.Errorf("fetch stripe %s %s: %w: %w", r.Type, r.ID, ErrNotFound, err)
	}
	if errors.Is(err, stripeapi.ErrUnavailable) || errors.Is(err, stripeapi.ErrLimited) {
		// The breaker or the limiter kept the request from Stripe.
		return Fetched{}, fmt.Errorf("fetch stripe %s %s: %w: %w", r.Type, r.ID, ErrNotAttempted, err)
	}
	if err != nil {
		return Fetched{}, fmt.Errorf("fetch stripe %s %s: %w", r.Type, r.ID, err)
	}
	var s struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Deleted bool   `json:"deleted"`
	}
	if err := json.Unmarshal(body, &s); err != nil || s.ID != r.ID {
		return Fetched{}, fmt.Errorf("fetch stripe %s %s: unexpected response", r.Type, r.ID)
	}
	return Fetched{State: body, Status: s.Status, Deleted: s.Deleted}, nil
}
