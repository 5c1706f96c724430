// Package api serves the query and operations API (default
// 127.0.0.1:8081): projections and access decisions for applications, and
// for operators the history behind a state, the dead list, dead external
// actions, replays and payload purges. It owns the routes, their scopes and
// their JSON; no table: every read and write goes through the package that
// owns the table (inbox, projection, action, job).
//
// Every /v1 route requires a bearer token holding the route's scope (see
// Scope); every payload read and every operation that changes state is
// recorded in ops_audit (package audit) in the request that did it. It must
// never write a projection itself — replays go down the same outbox →
// Kafka path — and never hold SQL of its own.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookyard/hookyard/pkg/access"
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/health"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/audit"
	"github.com/hookyard/hookyard/pkg/ops/job"
	"github.com/hookyard/hookyard/pkg/projection"
)

// Config configures the API.
type Config struct {
	// Token is OPS_TOKEN: the bearer token with every scope. Defaults to
	// none: only Tokens authenticate.
	Token string
	// Tokens are the scoped tokens beside Token. Defaults to none.
	Tokens []Token
	// Auth checks the tokens. Defaults to NewAuthenticator(Token, Tokens).
	Auth *Authenticator
	// MinPurgeAge is the floor under POST /v1/purge's older_than
	// (retention.min_purge_age). Defaults to MinPurgeAgeDefault.
	MinPurgeAge time.Duration
	// AuditAge: purge jobs also delete audit records older than this
	// (retention.audit_age). Defaults to 0: they leave the audit alone.
	AuditAge time.Duration
	// Policy is the access policy.
	Policy access.Policy
	// Gatherer serves /metrics. Defaults to an empty registry.
	Gatherer prometheus.Gatherer
	// Now is the clock of access decisions. Defaults to time.Now.
	Now func() time.Time
	// Brokers are the Kafka seed brokers partition replays read from.
	// Defaults to none: POST /v1/replay/partition then answers 503.
	Brokers []string
	// Topic is the events topic partition replays read. Required with
	// Brokers.
	Topic string
	// ChangesTopic is the compacted changes topic an erasure publishes the
	// erased projections' records to (POST /v1/erase). Defaults to none:
	// no record is published.
	ChangesTopic string
	// ActionsWaiting says, per action kind, why actions of that kind are
	// not being sent (no receipt URL configured), for explain and
	// GET /v1/actions/... Defaults to none.
	ActionsWaiting map[string]string
	// Effects are the declared effects: `actions show` reads the fact of
	// the type an action's kind is declared on. Defaults to
	// action.DefaultEffects.
	Effects action.Effects
	// Jobs runs purges and replays. Defaults to NewJobs over Brokers and
	// Topic, driven only by the requests that start jobs: a job whose
	// runner died is resumed only where a runner's Run is running.
	Jobs *job.Runner
}

// New returns the API's handler.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config) *echo.Echo {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.NewRegistry()
	}
	if cfg.Jobs == nil {
		cfg.Jobs = NewJobs(pool, log, cfg.Brokers, cfg.Topic)
	}
	if cfg.Auth == nil {
		cfg.Auth = NewAuthenticator(cfg.Token, cfg.Tokens)
	}
	if cfg.MinPurgeAge <= 0 {
		cfg.MinPurgeAge = MinPurgeAgeDefault
	}
	a := &api{pool: pool, log: log.With(slog.String("service", "ops-api")), cfg: cfg, jobs: cfg.Jobs}
	e := health.NewEcho()
	health.Register(e, cfg.Gatherer, func(ctx context.Context) error { return pool.Ping(ctx) })
	// Every route names its scope here, where a new route is added.
	v1 := e.Group("/v1")
	access, read, operate := cfg.Auth.Require(ScopeAccess), cfg.Auth.Require(ScopeRead), cfg.Auth.Require(ScopeOperate)
	v1.GET("/access/:provider/:account/:environment/:id", a.access, access)
	v1.GET("/projections/:provider/:account/:environment/:type/:id", a.projection, read)
	v1.GET("/explain/:provider/:account/:environment/:type/:id", a.explain, read)
	v1.GET("/events/:provider/:account/:environment/:event_id", a.event, read)
	v1.GET("/events", a.listEvents, read)
	v1.GET("/jobs", a.listJobs, read)
	v1.GET("/jobs/:id", a.getJob, read)
	v1.POST("/jobs/:id/cancel", a.cancelJob, operate)
	v1.GET("/dead", a.listDead, read)
	v1.GET("/parked", a.listParked, read)
	v1.GET("/dead/:provider/:account/:environment/:event_id", a.showDead, read)
	v1.GET("/actions", a.listActions, read)
	v1.GET("/actions/:provider/:account/:environment/:subject/:kind", a.showAction, read)
	v1.GET("/audit", a.listAudit, read)
	v1.POST("/replay/event/:provider/:account/:environment/:event_id", a.replayEvent, operate)
	v1.POST("/replay/dead", a.replayDead, operate)
	v1.POST("/replay/resource/:provider/:account/:environment/:type/:id", a.replayResource, operate)
	v1.POST("/purge", a.purge, operate)
	v1.POST("/replay/partition", a.replayPartition, operate)
	v1.POST("/dead/replay", a.replayDeadMatching, operate)
	v1.POST("/actions/replay", a.replayActions, operate)
	v1.POST("/actions/skip", a.skipAction, operate)
	v1.POST("/erase", a.erase, operate)
	return e
}

// MinPurgeAgeDefault is Config.MinPurgeAge's default
// (config.MinPurgeAgeDefault).
const MinPurgeAgeDefault = time.Hour

type api struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	cfg  Config
	jobs *job.Runner
}

func fail(c echo.Context, status int, code, msg string) error {
	return c.JSON(status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// queryLimit reads ?limit=: 0 when absent, ok false unless it is an integer
// from 1 to MaxLimit.
func queryLimit(c echo.Context) (limit int, ok bool) {
	s := c.QueryParam("limit")
	if s == "" {
		return 0, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > MaxLimit {
		return 0, false
	}
	return n, true
}

func badLimit(c echo.Context) error {
	return fail(c, http.StatusBadRequest, "bad_limit", fmt.Sprintf("limit must be a positive integer up to %d", MaxLimit))
}

func badSince(c echo.Context) error {
	return fail(c, http.StatusBadRequest, "bad_since", "since must be a duration (24h) or RFC 3339 time")
}

func resourceParam(c echo.Context, typ string) message.Resource {
	if typ == "" {
		typ = c.Param("type")
	}
	return message.Resource{Provider: c.Param("provider"), SourceAccount: c.Param("account"),
		Environment: c.Param("environment"), Type: typ, ID: c.Param("id")}
}

func (a *api) internal(c echo.Context, err error) error {
	a.log.Error("ops api", slog.String("path", c.Path()), slog.String("error", err.Error()))
	return fail(c, http.StatusServiceUnavailable, "unavailable", "database unavailable")
}

// MaxLimit caps how many rows one API call lists or replays; larger jobs
// page with since/limit (or use the CLI).
const MaxLimit = 10_000

func intParam(c echo.Context, name string, def int) int {
	if v, err := strconv.Atoi(c.QueryParam(name)); err == nil && v > 0 {
		return min(v, MaxLimit)
	}
	return def
}

func (a *api) projection(c echo.Context) error {
	r := resourceParam(c, "")
	p, err := projection.Get(c.Request().Context(), a.pool, r)
	if errors.Is(err, projection.ErrNotFound) {
		return fail(c, http.StatusNotFound, "not_found", "no projection for that resource")
	}
	if err != nil {
		return a.internal(c, err)
	}
	hist, err := projection.History(c.Request().Context(), a.pool, r, intParam(c, "history", 20))
	if err != nil {
		return a.internal(c, err)
	}
	return c.JSON(http.StatusOK, map[string]any{"projection": p, "history": hist})
}

func (a *api) access(c echo.Context) error {
	r := resourceParam(c, "subscription")
	p, err := projection.Get(c.Request().Context(), a.pool, r)
	if errors.Is(err, projection.ErrNotFound) {
		return c.JSON(http.StatusNotFound, map[string]any{"access": false, "reason": "unknown_subscription"})
	}
	if err != nil {
		return a.internal(c, err)
	}
	return c.JSON(http.StatusOK, access.Decide(p, a.cfg.Policy, a.cfg.Now()))
}

func eventKey(c echo.Context) inbox.Key {
	return inbox.Key{Provider: c.Param("provider"), SourceAccount: c.Param("account"),
		Environment: c.Param("environment"), EventID: c.Param("event_id")}
}

func (a *api) event(c echo.Context) error {
	withPayload, denied, err := wantsPayload(c)
	if denied {
		return err
	}
	row, err := inbox.Get(c.Request().Context(), a.pool, eventKey(c), withPayload)
	if errors.Is(err, inbox.ErrNotFound) {
		return fail(c, http.StatusNotFound, "not_found", "no such event")
	}
	if err != nil {
		return a.internal(c, err)
	}
	if withPayload {
		if err := a.recordPayloadRead(c, row); err != nil {
			return payloadNotRecorded(c)
		}
	}
	return c.JSON(http.StatusOK, row)
}

func (a *api) listEvents(c echo.Context) error {
	status := c.QueryParam("status")
	if status == "" {
		status = inbox.StatusDead
	}
	rows, err := inbox.List(c.Request().Context(), a.pool, status, intParam(c, "limit", 100))
	if err != nil {
		return a.internal(c, err)
	}
	return c.JSON(http.StatusOK, map[string]any{"events": rows})
}

func (a *api) replayEvent(c echo.Context) error {
	n, err := inbox.Replay(c.Request().Context(), a.pool, eventKey(c))
	switch {
	case errors.Is(err, inbox.ErrNotFound):
		return fail(c, http.StatusNotFound, "not_found", "no such event")
	case errors.Is(err, inbox.ErrPurged):
		return fail(c, http.StatusGone, inbox.SkipPurged, "the retention purge dropped this event's payload; there is nothing left to replay")
	case errors.Is(err, inbox.ErrIgnored):
		return fail(c, http.StatusConflict, inbox.SkipIgnored, "the event is outside its endpoint's allow-list and was never processed")
	case errors.Is(err, inbox.ErrBusy):
		return fail(c, http.StatusConflict, inbox.SkipBusy, "another transaction holds the event; try again")
	case err != nil:
		return a.internal(c, err)
	}
	a.log.Info("event replayed", slog.String("event_id", c.Param("event_id")))
	if err := a.record(c, audit.ActionReplayEvent, eventTarget(eventKey(c)), n); err != nil {
		return auditFailed(c)
	}
	return c.JSON(http.StatusAccepted, map[string]any{"replayed": n})
}

func since(c echo.Context) (time.Time, error) {
	return parseSince(c.QueryParam("since"))
}

// parseSince reads a duration back from now (24h) or an RFC 3339 time; ""
// is the zero time (no bound).
func parseSince(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("since %s is not in the past", s)
		}
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, err
	}
	if t.Before(time.Unix(0, 0)) || t.After(time.Now()) {
		return time.Time{}, fmt.Errorf("since %s is outside 1970..now", s)
	}
	return t, nil
}

func (a *api) replayDead(c echo.Context) error {
	t, err := since(c)
	if err != nil {
		return badSince(c)
	}
	n, err := inbox.ReplayDead(c.Request().Context(), a.pool, t, intParam(c, "limit", 1000))
	if err != nil {
		return a.internal(c, err)
	}
	a.log.Info("dead events replayed", slog.Int64("count", n))
	target := filterTarget(map[string]any{"since": c.QueryParam("since"), "limit": c.QueryParam("limit")})
	if err := a.record(c, audit.ActionReplayDead, target, n); err != nil {
		return auditFailed(c)
	}
	return c.JSON(http.StatusAccepted, map[string]any{"replayed": n})
}

// listParked serves GET /v1/parked?provider=&account=&environment=&limit=:
// projections waiting for reconciliation and why.
func (a *api) listParked(c echo.Context) error {
	q := c.QueryParams()
	f := projection.ParkedFilter{Provider: q.Get("provider"), SourceAccount: q.Get("account"), Environment: q.Get("environment")}
	limit, ok := queryLimit(c)
	if !ok {
		return badLimit(c)
	}
	f.Limit = limit
	parked, err := projection.ListParked(c.Request().Context(), a.pool, f)
	if err != nil {
		return a.internal(c, err)
	}
	return c.JSON(http.StatusOK, map[string]any{"parked": parked, "count": len(parked)})
}
