package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookyard/hookyard/pkg/ops/explain"
)

// explain answers GET /v1/explain/{provider}/{account}/{environment}/{type}/{id}
// with the resource's timeline (?limit=N entries, default
// explain.LimitDefault). A resource nothing is known about is a 404.
func (a *api) explain(c echo.Context) error {
	r := resourceParam(c, "")
	t, err := explain.Build(c.Request().Context(), a.pool, r, explain.Options{
		Limit: intParam(c, "limit", explain.LimitDefault), Policy: a.cfg.Policy, Now: a.cfg.Now,
		ActionsWaiting: a.cfg.ActionsWaiting})
	if err != nil {
		return a.internal(c, err)
	}
	if t.Projection == nil && len(t.Entries) == 0 && len(t.Actions) == 0 {
		return fail(c, http.StatusNotFound, "not_found", "nothing recorded for that resource")
	}
	return c.JSON(http.StatusOK, t)
}
