package reconciler

import (
	"context"
	"time"

	"github.com/hookyard/hookyard/pkg/provider/chargebee"
)

// ChargebeeEvents lists a Chargebee site's events (GET /api/v2/events)
// with the site's API key and quota, oldest first.
type ChargebeeEvents struct {
	Client *chargebee.Client
}

// ListEvents implements EventLister; the cursor is Chargebee's next_offset.
func (c ChargebeeEvents) ListEvents(ctx context.Context, since time.Time, cursor string, limit int) (EventPage, error) {
	// occurred_at[after] is exclusive: one second earlier keeps events of
	// the bound's own second.
	evs, next, err := c.Client.ListEvents(ctx, since.Add(-time.Second), cursor, limit)
	if err != nil {
		return EventPage{}, err
	}
	page := EventPage{Events: make([]ListedEvent, len(evs)), Next: next}
	for i, ev := range evs {
		page.Events[i] = ListedEvent{ID: ev.ID, At: ev.OccurredAt, Body: ev.Body}
	}
	return page, nil
}
