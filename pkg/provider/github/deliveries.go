package github

import (
	"context"

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
	return g.Client.Redeliver(ctx, id)
}
