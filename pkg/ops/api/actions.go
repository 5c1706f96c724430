package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/ops/audit"
)

// actionsRequest is the body of POST /v1/actions/replay: an action's key
// (all of provider, account, environment, subject and kind) or filters.
type actionsRequest struct {
	Provider    string `json:"provider"`
	Account     string `json:"account"`
	Environment string `json:"environment"`
	Subject     string `json:"subject"`
	Kind        string `json:"kind"`
	Since       string `json:"since"`
	Limit       int    `json:"limit"`
	// Reason says why an action is skipped (POST /v1/actions/skip).
	Reason string `json:"reason"`
}

func (r actionsRequest) filter(status string) (action.Filter, error) {
	t, err := parseSince(r.Since)
	if err != nil {
		return action.Filter{}, err
	}
	return action.Filter{Status: status, Provider: r.Provider, SourceAccount: r.Account, Environment: r.Environment,
		Kind: r.Kind, Since: t, Limit: r.Limit}, nil
}

// listActions: GET /v1/actions?status=dead&provider=&account=&environment=&kind=&since=&limit=
func (a *api) listActions(c echo.Context) error {
	q := c.QueryParams()
	limit, ok := queryLimit(c)
	if !ok {
		return badLimit(c)
	}
	f, err := actionsRequest{Provider: q.Get("provider"), Account: q.Get("account"), Environment: q.Get("environment"),
		Kind: q.Get("kind"), Since: q.Get("since"), Limit: limit}.filter(q.Get("status"))
	if err != nil {
		return badSince(c)
	}
	rows, err := action.List(c.Request().Context(), a.pool, f)
	if err != nil {
		return a.internal(c, err)
	}
	return c.JSON(http.StatusOK, map[string]any{"actions": rows, "count": len(rows)})
}

func actionKey(c echo.Context) action.Key {
	return action.Key{Provider: c.Param("provider"), SourceAccount: c.Param("account"), Environment: c.Param("environment"),
		SubjectID: c.Param("subject"), Kind: c.Param("kind")}
}

// showAction: GET /v1/actions/{provider}/{account}/{environment}/{subject}/{kind}
func (a *api) showAction(c echo.Context) error {
	sh, err := action.Show(c.Request().Context(), a.pool, actionKey(c), a.cfg.Effects)
	if errors.Is(err, action.ErrNotFound) {
		return fail(c, http.StatusNotFound, "not_found", "no such action")
	}
	if err != nil {
		return a.internal(c, err)
	}
	if sh.Action.Status == action.StatusPending {
		sh.Waiting = a.cfg.ActionsWaiting[sh.Action.Kind]
	}
	return c.JSON(http.StatusOK, sh)
}

// replayActions: POST /v1/actions/replay with one action's key or filters.
func (a *api) replayActions(c echo.Context) error {
	var req actionsRequest
	if err := decodeBody(c, &req); err != nil {
		return fail(c, http.StatusBadRequest, "bad_body", "body must be JSON: an action's provider, account, environment, subject and kind, or filters: "+err.Error())
	}
	ctx := c.Request().Context()
	if req.Subject != "" {
		if req.Provider == "" || req.Account == "" || req.Environment == "" || req.Kind == "" {
			return fail(c, http.StatusBadRequest, "bad_key", "subject needs provider, account, environment and kind")
		}
		if req.Since != "" || req.Limit != 0 {
			return fail(c, http.StatusBadRequest, "bad_key", "give an action's key or filters, not both")
		}
		k := action.Key{Provider: req.Provider, SourceAccount: req.Account, Environment: req.Environment, SubjectID: req.Subject, Kind: req.Kind}
		err := action.ReplayDead(ctx, a.pool, k)
		switch {
		case errors.Is(err, action.ErrNotFound):
			return fail(c, http.StatusNotFound, "not_found", "no such action")
		case errors.Is(err, action.ErrNotDead):
			return fail(c, http.StatusConflict, "not_dead", err.Error()+"; only dead actions are replayed")
		case err != nil:
			return a.internal(c, err)
		}
		a.log.Info("dead action replayed", slog.String("key", k.String()))
		target := map[string]any{"provider": k.Provider, "account": k.SourceAccount, "environment": k.Environment,
			"subject": k.SubjectID, "kind": k.Kind}
		if err := a.record(c, audit.ActionReplayAction, target, 1); err != nil {
			return auditFailed(c)
		}
		return c.JSON(http.StatusAccepted, map[string]any{"replayed": 1})
	}
	if req.Limit < 0 || req.Limit > MaxLimit {
		return badLimit(c)
	}
	f, err := req.filter(action.StatusDead)
	if err != nil {
		return badSince(c)
	}
	n, err := action.ReplayDeadMatching(ctx, a.pool, f)
	if err != nil {
		return a.internal(c, err)
	}
	a.log.Info("dead actions replayed", slog.Int64("count", n))
	target := filterTarget(map[string]any{"provider": req.Provider, "account": req.Account, "environment": req.Environment,
		"kind": req.Kind, "since": req.Since, "limit": req.Limit})
	if err := a.record(c, audit.ActionReplayAction, target, n); err != nil {
		return auditFailed(c)
	}
	return c.JSON(http.StatusAccepted, map[string]any{"replayed": n})
}

// skipAction: POST /v1/actions/skip with one dead action's key and a
// reason: the action becomes skipped (never sent), and the later actions of
// its stream go out. Only a dead action is skipped (409 otherwise).
func (a *api) skipAction(c echo.Context) error {
	var req actionsRequest
	if err := decodeBody(c, &req); err != nil {
		return fail(c, http.StatusBadRequest, "bad_body", "body must be JSON: an action's provider, account, environment, subject and kind, and a reason: "+err.Error())
	}
	if req.Provider == "" || req.Account == "" || req.Environment == "" || req.Subject == "" || req.Kind == "" {
		return fail(c, http.StatusBadRequest, "bad_key", "skip needs one action's provider, account, environment, subject and kind")
	}
	if req.Since != "" || req.Limit != 0 {
		return fail(c, http.StatusBadRequest, "bad_key", "skip takes one action's key, no filters")
	}
	k := action.Key{Provider: req.Provider, SourceAccount: req.Account, Environment: req.Environment, SubjectID: req.Subject, Kind: req.Kind}
	err := action.Skip(c.Request().Context(), a.pool, k, req.Reason)
	switch {
	case errors.Is(err, action.ErrNotFound):
		return fail(c, http.StatusNotFound, "not_found", "no such action")
	case errors.Is(err, action.ErrNotDead):
		return fail(c, http.StatusConflict, "not_dead", err.Error()+"; only dead actions are skipped")
	case err != nil:
		return a.internal(c, err)
	}
	a.log.Info("dead action skipped", slog.String("key", k.String()))
	target := map[string]any{"provider": k.Provider, "account": k.SourceAccount, "environment": k.Environment,
		"subject": k.SubjectID, "kind": k.Kind, "reason": req.Reason}
	if err := a.record(c, audit.ActionSkipAction, target, 1); err != nil {
		return auditFailed(c)
	}
	return c.JSON(http.StatusOK, map[string]any{"skipped": 1})
}
