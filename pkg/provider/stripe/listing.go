package stripe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Events lists a Stripe account's events (GET /v1/events) with its
// endpoint's credentials, inside the background share of their quota.
type Events struct {
	Client *Client
	// Account is sent as Stripe-Account ("" for the key's own account).
	Account string
	// Types are sent as types[] (EventTypes); nil lists every type.
	Types []string
}

// ListEvents implements provider.EventLister: newest first, cursor = the
// last event's id (starting_after).
func (e Events) ListEvents(ctx context.Context, since time.Time, cursor string, limit int) (provider.EventPage, error) {
	evs, more, err := e.Client.ListEvents(provider.Background(ctx), e.Account, since, e.Types, cursor, limit)
	if err != nil {
		// Stripe answers an unknown starting_after with resource_missing
		// (https://docs.stripe.com/api/pagination); events older than 30
		// days are no longer listed (https://docs.stripe.com/api/events).
		if cursor != "" && (ErrorCode(err) == "resource_missing" || errors.Is(err, ErrNotFound)) {
			return provider.EventPage{}, fmt.Errorf("%w: %w", provider.ErrCursorGone, err)
		}
		return provider.EventPage{}, err
	}
	page := provider.EventPage{Events: make([]provider.ListedEvent, len(evs))}
	for i, ev := range evs {
		page.Events[i] = provider.ListedEvent{ID: ev.ID, At: ev.Created, Body: ev.Body}
	}
	if more && len(evs) > 0 {
		page.Next = evs[len(evs)-1].ID
	}
	return page, nil
}

// EventTypes is what to send as types[] for an endpoint's allow-list:
// the list itself when every entry is an exact name and there are at most
// MaxEventTypes (Stripe's types[] takes no wildcards), else nil
// (every type is listed and the allow-list filters them).
func EventTypes(allowed []string) []string {
	if len(allowed) == 0 || len(allowed) > MaxEventTypes {
		return nil
	}
	for _, t := range allowed {
		if strings.Contains(t, "*") {
			return nil
		}
	}
	return allowed
}
