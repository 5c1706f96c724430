package github

import (
	"context"
	"errors"
	"fmt"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Deliveries walks a GitHub hook's deliveries with the hook's own token and
// quota.
type Deliveries struct {
	Client *Client
}

// ListDeliveries implements provider.HookDeliveries.
func (g Deliveries) ListDeliveries(ctx context.Context, cursor string, limit int) ([]provider.HookDelivery, string, error) {
	ds, next, err := g.Client.ListDeliveries(ctx, cursor, limit)
	if err != nil {
		// Cursors are opaque and name a delivery GitHub keeps 3 days
		// (https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api);
		// one it no longer knows is refused with 422 or 404.
		if cursor != "" && (errors.Is(err, ErrUnprocessable) || errors.Is(err, ErrNotFound)) {
			return nil, "", fmt.Errorf("%w: %w", provider.ErrCursorGone, err)
		}
		return nil, "", err
	}
	out := make([]provider.HookDelivery, len(ds))
	for i, d := range ds {
		out[i] = provider.HookDelivery{ID: d.ID, GUID: d.GUID, StatusCode: d.StatusCode, DeliveredAt: d.DeliveredAt, Redelivery: d.Redelivery}
	}
	return out, next, nil
}

// Redeliver implements provider.HookDeliveries.
func (g Deliveries) Redeliver(ctx context.Context, id int64) error {
	err := g.Client.Redeliver(ctx, id)
	// 422: past the 3-day limit
	// (https://docs.github.com/en/rest/repos/webhooks#redeliver-a-delivery-for-a-repository-webhook);
	// 404: a delivery GitHub no longer knows. Neither passes by asking again.
	if errors.Is(err, ErrUnprocessable) || errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %w", provider.ErrRedeliveryRefused, err)
	}
	return err
}
