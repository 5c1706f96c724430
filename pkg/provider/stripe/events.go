package stripe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// MaxEventTypes is how many names GET /v1/events accepts in types[].
const MaxEventTypes = 20

// ListedEvent is one event of the events list, as Stripe returned it.
type ListedEvent struct {
	ID      string
	Type    string
	Created time.Time
	// Body is the event object's JSON, the same document Stripe delivers as
	// a webhook body.
	Body json.RawMessage
}

// ListEvents reads one page of GET /v1/events
// (https://docs.stripe.com/api/events/list): newest first, created at or
// after since (zero: no bound; Stripe keeps 30 days anyway), of the given
// exact types (nil: all; at most MaxEventTypes, Stripe's limit), after
// startingAfter ("" for the first page). Every event must carry the
// credentials' livemode.
func (c *Client) ListEvents(ctx context.Context, account string, since time.Time, types []string, startingAfter string, limit int) ([]ListedEvent, bool, error) {
	if len(types) > MaxEventTypes {
		return nil, false, fmt.Errorf("stripeapi: list events: %d types, Stripe accepts at most %d", len(types), MaxEventTypes)
	}
	q := url.Values{}
	if !since.IsZero() {
		q.Set("created[gte]", strconv.FormatInt(since.Unix(), 10))
	}
	for _, t := range types {
		q.Add("types[]", t)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if startingAfter != "" {
		q.Set("starting_after", startingAfter)
	}
	path := "/v1/events"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	body, err := c.do(ctx, account, path)
	if err != nil {
		return nil, false, err
	}
	var page struct {
		Data    []json.RawMessage `json:"data"`
		HasMore bool              `json:"has_more"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, false, fmt.Errorf("stripeapi: GET %s: decode list: %w", path, err)
	}
	out := make([]ListedEvent, 0, len(page.Data))
	for _, raw := range page.Data {
		var ev struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Created  int64  `json:"created"`
			Livemode *bool  `json:"livemode"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, false, fmt.Errorf("stripeapi: GET %s: decode event: %w", path, err)
		}
		if err := c.checkMode(path, ev.ID, ev.Livemode); err != nil {
			return nil, false, err
		}
		out = append(out, ListedEvent{ID: ev.ID, Type: ev.Type, Created: time.Unix(ev.Created, 0).UTC(), Body: raw})
	}
	return out, page.HasMore, nil
}
