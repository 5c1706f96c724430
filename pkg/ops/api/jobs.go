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

	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/ops/audit"
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
	if err := a.record(c, audit.ActionJobCancel, map[string]any{"job": id}, 0); err != nil {
		return auditFailed(c)
	}
	return c.JSON(http.StatusAccepted, map[string]any{"job": j})
}

func (a *api) listJobs(c echo.Context) error {
	jobs, err := job.List(c.Request().Context(), a.pool, c.QueryParam("status"), intParam(c, "limit", 50))
	if err != nil {
		return a.internal(c, err)
	}
	return c.JSON(http.StatusOK, map[string]any{"jobs": jobs})
}

// purge serves POST /v1/purge?older_than=720h[&dry_run=true]: a purge job,
// or with dry_run what it would touch, changing nothing.
func (a *api) purge(c echo.Context) error {
	d, err := time.ParseDuration(c.QueryParam("older_than"))
	if err != nil || d <= 0 {
		return fail(c, http.StatusBadRequest, "bad_older_than", "older_than must be a positive duration, e.g. 720h")
	}
	if d < a.cfg.MinPurgeAge {
		return fail(c, http.StatusBadRequest, "below_purge_floor",
			fmt.Sprintf("older_than %s is below retention.min_purge_age %s: events that young may still be needed for recovery", d, a.cfg.MinPurgeAge))
	}
	ctx := c.Request().Context()
	cutoff := a.cfg.Now().Add(-d)
	preview, err := inbox.PreviewPurge(ctx, a.pool, cutoff)
	if err != nil {
		return a.internal(c, err)
	}
	if c.QueryParam("dry_run") == "true" {
		return c.JSON(http.StatusOK, DryRun{DryRun: true, Cutoff: cutoff, PurgePreview: preview})
	}
	params := job.PurgeParams{Cutoff: cutoff}
	if a.cfg.AuditAge > 0 {
		params.AuditCutoff = a.cfg.Now().Add(-a.cfg.AuditAge)
	}
	j, err := a.jobs.Start(ctx, job.KindPurge, params)
	if err != nil {
		return a.internal(c, err)
	}
	// The rows the purge found to do when it started; the job's progress
	// has what it did.
	if err := a.record(c, audit.ActionPurge, map[string]any{"older_than": d.String(), "job": j.ID}, preview.Rows); err != nil {
		return auditFailed(c)
	}
	return started(c, j)
}

func (a *api) replayResource(c echo.Context) error {
	t, err := since(c)
	if err != nil {
		return fail(c, http.StatusBadRequest, "bad_since", "since must be a duration (24h) or RFC 3339 time")
	}
	r := resourceParam(c, "")
	j, err := a.jobs.Start(c.Request().Context(), job.KindReplayResource, job.ResourceParams{Resource: r, Since: t})
	if err != nil {
		return a.internal(c, err)
	}
	target := filterTarget(map[string]any{"provider": r.Provider, "account": r.SourceAccount, "environment": r.Environment,
		"type": r.Type, "id": r.ID, "since": c.QueryParam("since"), "job": j.ID})
	if err := a.record(c, audit.ActionReplayResource, target, j.Progress["replayed"]); err != nil {
		return auditFailed(c)
	}
	return started(c, j)
}
