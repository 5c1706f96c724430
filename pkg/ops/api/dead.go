package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/audit"
	"github.com/hookyard/hookyard/pkg/projection"
)

// deadRequest is the body of POST /v1/dead/replay: an event's key (all of
// provider, account, environment and event_id) or filters.
type deadRequest struct {
	Provider     string `json:"provider"`
	Account      string `json:"account"`
	Environment  string `json:"environment"`
	EventID      string `json:"event_id"`
	Type         string `json:"type"`
	ResourceType string `json:"resource_type"`
	ResourceID   string `json:"resource_id"`
	Since        string `json:"since"`
	Limit        int    `json:"limit"`
}

func (r deadRequest) filter() (inbox.DeadFilter, error) {
	t, err := parseSince(r.Since)
	if err != nil {
		return inbox.DeadFilter{}, err
	}
	return inbox.DeadFilter{Provider: r.Provider, SourceAccount: r.Account, Environment: r.Environment, EventType: r.Type,
		ResourceType: r.ResourceType, ResourceID: r.ResourceID, Since: t, Limit: r.Limit}, nil
}

// decodeBody reads a JSON body strictly (a misspelt field is an error, not
// a filter silently dropped); an empty body is the zero value.
func decodeBody(c echo.Context, v any) error {
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func (a *api) listDead(c echo.Context) error {
	q := c.QueryParams()
	limit, ok := queryLimit(c)
	if !ok {
		return badLimit(c)
	}
	f, err := deadRequest{Provider: q.Get("provider"), Account: q.Get("account"), Environment: q.Get("environment"),
		Type: q.Get("type"), ResourceType: q.Get("resource_type"), ResourceID: q.Get("resource_id"),
		Since: q.Get("since"), Limit: limit}.filter()
	if err != nil {
		return badSince(c)
	}
	rows, err := inbox.ListDead(c.Request().Context(), a.pool, f)
	if err != nil {
		return a.internal(c, err)
	}
	if rows == nil {
		rows = []inbox.Row{}
	}
	return c.JSON(http.StatusOK, map[string]any{"events": rows, "count": len(rows)})
}

// DeadEvent is one event as `dead show` and GET /v1/dead/... present it:
// the inbox row (attempts, next attempt, last error, resource) and what the
// processor recorded for it in the resource's history.
type DeadEvent struct {
	Event   inbox.Row                 `json:"event"`
	History []projection.HistoryEntry `json:"history"`
}

// historyDepth is how far back a resource's history is searched for an
// event's entries.
const historyDepth = 200

// ShowEvent reads an event, with its payload when withPayload, and its
// entries in the resource's history. It shows the event whatever its
// status: the status field says whether it is still dead. It returns
// inbox.ErrNotFound when there is no such event.
func ShowEvent(ctx context.Context, pool *pgxpool.Pool, k inbox.Key, withPayload bool) (DeadEvent, error) {
	row, err := inbox.Get(ctx, pool, k, withPayload)
	if err != nil {
		return DeadEvent{}, err
	}
	r := message.Resource{Provider: row.Provider, SourceAccount: row.SourceAccount, Environment: row.Environment,
		Type: row.ResourceType, ID: row.ResourceID}
	if r.ID == "" {
		r.Type, r.ID = "event", row.EventID
	}
	hist, err := projection.History(ctx, pool, r, historyDepth)
	if err != nil {
		return DeadEvent{}, err
	}
	out := DeadEvent{Event: row, History: []projection.HistoryEntry{}}
	for _, h := range hist {
		if h.EventID == row.EventID {
			out.History = append(out.History, h)
		}
	}
	return out, nil
}

func (a *api) showDead(c echo.Context) error {
	withPayload, denied, err := wantsPayload(c)
	if denied {
		return err
	}
	ev, err := ShowEvent(c.Request().Context(), a.pool, eventKey(c), withPayload)
	if errors.Is(err, inbox.ErrNotFound) {
		return fail(c, http.StatusNotFound, "not_found", "no such event")
	}
	if err != nil {
		return a.internal(c, err)
	}
	if withPayload {
		if err := a.recordPayloadRead(c, ev.Event); err != nil {
			return payloadNotRecorded(c)
		}
	}
	return c.JSON(http.StatusOK, ev)
}

func (a *api) replayDeadMatching(c echo.Context) error {
	var req deadRequest
	if err := decodeBody(c, &req); err != nil {
		return fail(c, http.StatusBadRequest, "bad_body", "body must be JSON: an event's provider, account, environment and event_id, or filters: "+err.Error())
	}
	ctx := c.Request().Context()
	if req.EventID != "" {
		if req.Provider == "" || req.Account == "" || req.Environment == "" {
			return fail(c, http.StatusBadRequest, "bad_key", "event_id needs provider, account and environment")
		}
		if req.Type != "" || req.ResourceType != "" || req.ResourceID != "" || req.Since != "" || req.Limit != 0 {
			return fail(c, http.StatusBadRequest, "bad_key", "give an event's key or filters, not both")
		}
		k := inbox.Key{Provider: req.Provider, SourceAccount: req.Account, Environment: req.Environment, EventID: req.EventID}
		err := inbox.ReplayDeadEvent(ctx, a.pool, k)
		switch {
		case errors.Is(err, inbox.ErrNotFound):
			return fail(c, http.StatusNotFound, "not_found", "no such event")
		case errors.Is(err, inbox.ErrNotDead):
			return fail(c, http.StatusConflict, "not_dead", err.Error()+"; POST /v1/replay/event/... replays it anyway")
		case err != nil:
			return a.internal(c, err)
		}
		a.log.Info("dead event replayed", slog.String("event_id", k.EventID))
		if err := a.record(c, audit.ActionReplayDead, eventTarget(k), 1); err != nil {
			return auditFailed(c)
		}
		return c.JSON(http.StatusAccepted, map[string]any{"replayed": 1})
	}
	if req.Limit < 0 || req.Limit > MaxLimit {
		return badLimit(c)
	}
	f, err := req.filter()
	if err != nil {
		return badSince(c)
	}
	n, err := inbox.ReplayDeadMatching(ctx, a.pool, f)
	if err != nil {
		return a.internal(c, err)
	}
	a.log.Info("dead events replayed", slog.Int64("count", n))
	target := filterTarget(map[string]any{"provider": req.Provider, "account": req.Account, "environment": req.Environment,
		"type": req.Type, "resource_type": req.ResourceType, "resource_id": req.ResourceID, "since": req.Since, "limit": req.Limit})
	if err := a.record(c, audit.ActionReplayDead, target, n); err != nil {
		return auditFailed(c)
	}
	return c.JSON(http.StatusAccepted, map[string]any{"replayed": n})
}
