package chargebee

import (
	"context"
	"fmt"
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
		// next_offset is opaque and may stop being valid (events age out);
		// Chargebee refuses it as a wrong offset parameter, 400
		// (https://apidocs.chargebee.com/docs/api/error-handling).
		if cursor != "" && BadParam(err) == "offset" {
			return provider.EventPage{}, fmt.Errorf("%w: %w", provider.ErrCursorGone, err)
		}
		return provider.EventPage{}, err
	}
	page := provider.EventPage{Events: make([]provider.ListedEvent, len(evs)), Next: next}
	for i, ev := range evs {
		page.Events[i] = provider.ListedEvent{ID: ev.ID, At: ev.OccurredAt, Body: ev.Body}
	}
	return page, nil
}
