package chargebee

import (
	"context"
	"time"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Events lists a Chargebee site's events (GET /api/v2/events) with the
// site's API key and quota, oldest first.
type Events struct {
	Client *Client
}

// ListEvents implements provider.EventLister; the cursor is Chargebee's
// next_offset.
func (c Events) ListEvents(ctx context.Context, since time.Time, cursor string, limit int) (provider.EventPage, error) {
	// occurred_at[after] is exclusive: one second earlier keeps events of
	// the bound's own second.
	evs, next, err := c.Client.ListEvents(ctx, since.Add(-time.Second), cursor, limit)
	if err != nil {
		return provider.EventPage{}, err
	}
	page := provider.EventPage{Events: make([]provider.ListedEvent, len(evs)), Next: next}
	for i, ev := range evs {
		page.Events[i] = provider.ListedEvent{ID: ev.ID, At: ev.OccurredAt, Body: ev.Body}
	}
	return page, nil
}
