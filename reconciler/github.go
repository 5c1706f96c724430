package reconciler

import (
	"context"

	"github.com/hookyard/hookyard/pkg/provider/github"
)

// GitHubHook walks a GitHub hook's deliveries with the hook's own token and
// quota.
type GitHubHook struct {
	Client *github.Client
}

// ListDeliveries implements HookDeliveries.
func (g GitHubHook) ListDeliveries(ctx context.Context, cursor string, limit int) ([]HookDelivery, string, error) {
	ds, next, err := g.Client.ListDeliveries(ctx, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]HookDelivery, len(ds))
	for i, d := range ds {
		out[i] = HookDelivery{ID: d.ID, GUID: d.GUID, StatusCode: d.StatusCode, DeliveredAt: d.DeliveredAt, Redelivery: d.Redelivery}
	}
	return out, next, nil
}

// Redeliver implements HookDeliveries.
func (g GitHubHook) Redeliver(ctx context.Context, id int64) error {
	return g.Client.Redeliver(ctx, id)
}
