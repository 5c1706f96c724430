package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/hookyard/hookyard/pkg/ops/audit"
	"github.com/hookyard/hookyard/pkg/ops/job"
	"github.com/hookyard/hookyard/pkg/ops/replay"
)

// partitionRequest is the body of POST /v1/replay/partition.
type partitionRequest struct {
	Partition  *int32 `json:"partition"`
	FromOffset *int64 `json:"from_offset"`
	// Since is a duration back from now (2h) or an RFC 3339 time.
	Since    string `json:"since"`
	ToOffset *int64 `json:"to_offset"`
	Limit    int    `json:"limit"`
}

func (a *api) replayPartition(c echo.Context) error {
	var body partitionRequest
	if err := decodeBody(c, &body); err != nil {
		return fail(c, http.StatusBadRequest, "bad_body", "body must be JSON {partition, from_offset | since, to_offset, limit}: "+err.Error())
	}
	if body.Partition == nil {
		return fail(c, http.StatusBadRequest, "bad_request", "partition is required")
	}
	t, err := parseSince(body.Since)
	if err != nil {
		return fail(c, http.StatusBadRequest, "bad_since", "since must be a duration (24h) or RFC 3339 time")
	}
	if len(a.cfg.Brokers) == 0 || a.cfg.Topic == "" {
		return fail(c, http.StatusServiceUnavailable, "kafka_not_configured", "this API was started without Kafka brokers and topic")
	}
	j, err := a.jobs.Start(c.Request().Context(), job.KindReplayPartition, job.PartitionParams{Partition: *body.Partition,
		FromOffset: body.FromOffset, Since: t, ToOffset: body.ToOffset, Limit: body.Limit})
	switch {
	case errors.Is(err, replay.ErrInvalid):
		return fail(c, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, replay.ErrUnknownTopic):
		return fail(c, http.StatusServiceUnavailable, "unknown_topic", err.Error())
	case errors.Is(err, job.ErrUnknownKind):
		return fail(c, http.StatusServiceUnavailable, "kafka_not_configured", "this API was started without Kafka brokers and topic")
	case err != nil:
		a.log.Error("partition replay", slog.String("error", err.Error()))
		return c.JSON(http.StatusServiceUnavailable, map[string]any{
			"error": map[string]string{"code": "replay_failed", "message": err.Error()}, "job": j})
	}
	target := filterTarget(map[string]any{"since": body.Since, "limit": body.Limit, "job": j.ID})
	// Partition 0 and offset 0 are values, not absent filters.
	target["partition"] = *body.Partition
	for k, v := range map[string]*int64{"from_offset": body.FromOffset, "to_offset": body.ToOffset} {
		if v != nil {
			target[k] = *v
		}
	}
	// The first step's count; the job's progress has the rest.
	if err := a.record(c, audit.ActionReplayPartition, target, j.Progress["replayed_events"]); err != nil {
		return auditFailed(c)
	}
	return started(c, j)
}
