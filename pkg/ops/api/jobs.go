package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/hookyard/hookyard/pkg/ops/job"
	"github.com/hookyard/hookyard/pkg/ops/replay"
)

// NewJobs returns the runner of the API's long operations: purges and
// resource replays always, partition replays when brokers and topic are
// given. Run it (Runner.Run) beside the API so jobs whose runner died are
// resumed.
func NewJobs(pool *pgxpool.Pool, log *slog.Logger, brokers []string, topic string) *job.Runner {
	steps := map[string]job.Step{
		job.KindPurge:          job.PurgeStep(pool),
		job.KindReplayResource: job.ReplayResourceStep(pool),
		job.KindReplayDead:     job.ReplayDeadStep(pool),
	}
	if r, err := replay.New(pool, log, replay.Config{Brokers: brokers, Topic: topic}); err == nil {
		steps[job.KindReplayPartition] = job.ReplayPartitionStep(r)
	}
	return job.New(pool, log, job.Config{Steps: steps})
}

// started answers 202 with the job and where to follow it.
func started(c echo.Context, j job.Job) error {
	c.Response().Header().Set("Location", fmt.Sprintf("/v1/jobs/%d", j.ID))
	return c.JSON(http.StatusAccepted, map[string]any{"job": j})
}

func (a *api) getJob(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return fail(c, http.StatusBadRequest, "bad_id", "job id must be an integer")
	}
	j, err := job.Get(c.Request().Context(), a.pool, id)
	if errors.Is(err, job.ErrNotFound) {
		return fail(c, http.StatusNotFound, "not_found", "no job with that id")
	}
	if err != nil {
		return a.internal(c, err)
	}
	return c.JSON(http.StatusOK, map[string]any{"job": j})
}

// cancelJob serves POST /v1/jobs/{id}/cancel: the job stops at its next
// step boundary (202 with the job); 409 when it already finished.
func (a *api) cancelJob(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return fail(c, http.StatusBadRequest, "bad_id", "job id must be an integer")
	}
	j, err := job.Cancel(c.Request().Context(), a.pool, id)
	switch {
	case errors.Is(err, job.ErrNotFound):
		return fail(c, http.StatusNotFound, "not_found", "no job with that id")
	case errors.Is(err, job.ErrFinished):
		return fail(c, http.StatusConflict, "finished", "the job is no longer running")
	case err != nil:
		return a.internal(c, err)
	}
	a.log.Info("job cancel requested", slog.Int64("job", id))
	return c.JSON(http.StatusAccepted, map[string]any{"job": j})
}

func (a *api) listJobs(c echo.Context) error {
	jobs, err := job.List(c.Request().Context(), a.pool, c.QueryParam("status"), intParam(c, "limit", 50))
	if err != nil {
		return a.internal(c, err)
	}
	return c.JSON(http.StatusOK, map[string]any{"jobs": jobs})
}

func (a *api) purge(c echo.Context) error {
	d, err := time.ParseDuration(c.QueryParam("older_than"))
	if err != nil || d <= 0 {
		return fail(c, http.StatusBadRequest, "bad_older_than", "older_than must be a positive duration, e.g. 720h")
	}
	j, err := a.jobs.Start(c.Request().Context(), job.KindPurge, job.PurgeParams{Cutoff: a.cfg.Now().Add(-d)})
	if err != nil {
		return a.internal(c, err)
	}
	return started(c, j)
}

func (a *api) replayResource(c echo.Context) error {
	t, err := since(c)
	if err != nil {
		return fail(c, http.StatusBadRequest, "bad_since", "since must be a duration (24h) or RFC 3339 time")
	}
	j, err := a.jobs.Start(c.Request().Context(), job.KindReplayResource, job.ResourceParams{Resource: resourceParam(c, ""), Since: t})
	if err != nil {
		return a.internal(c, err)
	}
	return started(c, j)
}
