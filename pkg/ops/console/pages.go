package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/fence"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/audit"
	"github.com/hookyard/hookyard/pkg/ops/explain"
	"github.com/hookyard/hookyard/pkg/ops/job"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/topic"
	"github.com/hookyard/hookyard/reconciler"
)

// ReplayMaxDefault bounds a replay by filter started from the console.
const ReplayMaxDefault = 100_000

// parseSince reads a duration back from now (24h) or an RFC 3339 time; ""
// is no bound.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("since %q is neither a duration (24h) nor an RFC 3339 time", s)
	}
	return t, nil
}

// Overview is the overview page's data. Every figure is a bounded read:
// the backlog counts stop at OverviewCap, the outbox's too (beyond it the
// span of its ids, an upper bound, is shown as such).
type Overview struct {
	Cards          []Card
	Cap            string
	Outbox         outboxrelay.BacklogBound
	OutboxCount    string
	OutboxSpan     string
	Lag            []PartitionRow
	LagError       string
	Actions        []action.OpenCapped
	Parked         int64
	Checkpoints    []reconciler.Checkpoint
	Divergences24h int64
}

func (c *Console) overview(ec echo.Context) error {
	ctx := ec.Request().Context()
	o := Overview{Cap: countText(OverviewCap, false)}
	backlog, err := inbox.CountBacklogCapped(ctx, c.pool, OverviewCap)
	if err != nil {
		return c.internal(ec, err)
	}
	o.Cards = c.backlogCards(backlog)
	if o.Outbox, err = outboxrelay.BacklogBounded(ctx, c.pool, OverviewCap); err != nil {
		return c.internal(ec, err)
	}
	o.OutboxCount, o.OutboxSpan = countText(o.Outbox.Rows, o.Outbox.Capped), countText(o.Outbox.IDSpan, false)
	if o.Actions, err = action.CountOpenCapped(ctx, c.pool, OverviewCap); err != nil {
		return c.internal(ec, err)
	}
	if o.Parked, err = projection.CountParked(ctx, c.pool); err != nil {
		return c.internal(ec, err)
	}
	if o.Checkpoints, err = reconciler.Checkpoints(ctx, c.pool); err != nil {
		return c.internal(ec, err)
	}
	if o.Divergences24h, err = projection.CountDivergencesSince(ctx, c.pool, c.cfg.Now().Add(-24*time.Hour)); err != nil {
		return c.internal(ec, err)
	}
	o.Lag, o.LagError = c.partitionRows(ctx)
	return c.render(ec, http.StatusOK, "overview.html", "Overview", o)
}

// PartitionRow is one partition as the console shows it.
type PartitionRow struct {
	Partition  int32
	Owner      string
	Generation int64
	TakenAt    time.Time
	Known      bool
	End        int64
	Committed  int64
	Lag        int64
}

// partitionRows joins the fences with the consumer group's progress; a
// Kafka that does not answer leaves the lag unknown, with why.
func (c *Console) partitionRows(ctx context.Context) ([]PartitionRow, string) {
	var rows []PartitionRow
	byPart := map[int32]int{}
	if c.cfg.Topic != "" {
		fences, err := fence.Partitions(ctx, c.pool, c.cfg.Topic)
		if err != nil {
			return nil, err.Error()
		}
		for _, f := range fences {
			byPart[f.Partition] = len(rows)
			rows = append(rows, PartitionRow{Partition: f.Partition, Owner: f.Owner, Generation: f.Generation, TakenAt: f.TakenAt})
		}
	}
	if c.kafka == nil {
		return rows, "no Kafka brokers configured"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	prog, err := topic.GroupProgress{Client: c.kafka, Topic: c.cfg.Topic, Group: c.cfg.Group}.Progress(ctx)
	if err != nil {
		c.log.WarnContext(ctx, "console: consumer lag", slog.String("error", err.Error()))
		return rows, "Kafka did not answer"
	}
	for p, pp := range prog {
		i, ok := byPart[int32(p)]
		if !ok {
			i = len(rows)
			rows = append(rows, PartitionRow{Partition: int32(p)})
		}
		rows[i].Known, rows[i].End, rows[i].Committed = pp.Known, pp.End, pp.Consumed
		rows[i].Lag = max(pp.End-pp.Consumed, 0)
	}
	return rows, ""
}

// Match is a search result.
type Match struct {
	Label string
	URL   string
}

func resourceURL(r message.Resource) string {
	return "/console/resource/" + strings.Join([]string{url.PathEscape(r.Provider), url.PathEscape(r.SourceAccount),
		url.PathEscape(r.Environment), url.PathEscape(r.Type), url.PathEscape(r.ID)}, "/")
}

func eventURL(k inbox.Key) string {
	return "/console/event/" + strings.Join([]string{url.PathEscape(k.Provider), url.PathEscape(k.SourceAccount),
		url.PathEscape(k.Environment), url.PathEscape(k.EventID)}, "/")
}

// search finds an event by its id (for GitHub and Standard Webhooks the
// delivery's id) in every configured scope, one primary-key probe per
// scope, and a resource by its id in any provider, account and
// environment (inbox.FindResource). A full key goes straight to its page.
func (c *Console) search(ec echo.Context) error {
	ctx := ec.Request().Context()
	q := strings.TrimSpace(ec.QueryParam("q"))
	var matches []Match
	if q != "" {
		parts := strings.Split(q, "/")
		scopes := c.cfg.Scopes
		switch len(parts) {
		case 5:
			r := message.Resource{Provider: parts[0], SourceAccount: parts[1], Environment: parts[2], Type: parts[3], ID: parts[4]}
			return ec.Redirect(http.StatusSeeOther, resourceURL(r))
		case 4:
			scopes, q = []Scope{{Provider: parts[0], SourceAccount: parts[1], Environment: parts[2]}}, parts[3]
		}
		for _, s := range scopes {
			k := inbox.Key{Provider: s.Provider, SourceAccount: s.SourceAccount, Environment: s.Environment, EventID: q}
			row, err := inbox.Get(ctx, c.pool, k, false)
			if errors.Is(err, inbox.ErrNotFound) {
				continue
			}
			if err != nil {
				return c.internal(ec, err)
			}
			m := Match{Label: fmt.Sprintf("event %s (%s) in %s/%s/%s", row.EventID, row.EventType, s.Provider, s.SourceAccount, s.Environment), URL: eventURL(k)}
			if row.ResourceID != "" {
				m.URL = resourceURL(message.Resource{Provider: row.Provider, SourceAccount: row.SourceAccount,
					Environment: row.Environment, Type: row.ResourceType, ID: row.ResourceID})
			}
			matches = append(matches, m)
		}
		if len(parts) == 1 {
			found, err := inbox.FindResource(ctx, c.pool, q, 20)
			if err != nil {
				return c.internal(ec, err)
			}
			for _, r := range found {
				matches = append(matches, Match{Label: "resource " + r.Key(), URL: resourceURL(r)})
			}
		}
		if len(matches) == 1 {
			return ec.Redirect(http.StatusSeeOther, matches[0].URL)
		}
	}
	return c.render(ec, http.StatusOK, "search.html", "Search", map[string]any{"Q": q, "Matches": matches})
}

// Timeline sizes of the resource page: the latest TimelineDefault entries,
// and at most TimelineMax when the operator asks for older ones. Each
// source is read newest first through its resource index, so a page costs
// its entries, not the resource's history.
const (
	TimelineDefault = explain.LimitDefault
	TimelineMax     = 2_000
)

// ResourcePage is the resource page's data.
type ResourcePage struct {
	explain.Timeline
	// Older is the URL of the same page with more of the older entries;
	// empty when none are left out, or at TimelineMax.
	Older string
}

func (c *Console) resource(ec echo.Context) error {
	r := message.Resource{Provider: ec.Param("provider"), SourceAccount: ec.Param("account"),
		Environment: ec.Param("environment"), Type: ec.Param("type"), ID: ec.Param("id")}
	limit := TimelineDefault
	if s := ec.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > TimelineMax {
			return c.refuse(ec, http.StatusBadRequest, "limit must be from 1 to "+strconv.Itoa(TimelineMax))
		}
		limit = n
	}
	t, err := explain.Build(ec.Request().Context(), c.pool, r, explain.Options{Limit: limit, Policy: c.cfg.Policy, Now: c.cfg.Now,
		ActionsWaiting: c.cfg.ActionsWaiting})
	if err != nil {
		return c.internal(ec, err)
	}
	if t.Projection == nil && len(t.Entries) == 0 && len(t.Actions) == 0 {
		return c.refuse(ec, http.StatusNotFound, "nothing is recorded for "+r.Key())
	}
	p := ResourcePage{Timeline: t}
	if t.Truncated && limit < TimelineMax {
		p.Older = resourceURL(r) + "?limit=" + strconv.Itoa(min(limit*4, TimelineMax))
	}
	return c.render(ec, http.StatusOK, "resource.html", r.ID, p)
}

// event shows one event; its payload only to a principal with the payload
// scope who asked for it, and every such read is logged with who read it.
func (c *Console) event(ec echo.Context) error {
	k := inbox.Key{Provider: ec.Param("provider"), SourceAccount: ec.Param("account"),
		Environment: ec.Param("environment"), EventID: ec.Param("event_id")}
	s := sess(ec)
	withPayload := ec.QueryParam("payload") == "1"
	if withPayload && !s.principal.Scopes.Has(ScopePayload) {
		return c.refuse(ec, http.StatusForbidden, "your token does not have the payload scope")
	}
	row, err := inbox.Get(ec.Request().Context(), c.pool, k, withPayload)
	if errors.Is(err, inbox.ErrNotFound) {
		return c.refuse(ec, http.StatusNotFound, "no such event")
	}
	if err != nil {
		return c.internal(ec, err)
	}
	if withPayload {
		// Recorded before it is shown: a payload whose read cannot be
		// recorded is not shown.
		if err := audit.Record(ec.Request().Context(), c.pool, "console:"+s.principal.Name, audit.ActionPayloadRead, k, 1); err != nil {
			return c.internal(ec, err)
		}
		c.log.InfoContext(ec.Request().Context(), "console: payload read", slog.String("principal", s.principal.Name),
			slog.String("provider", k.Provider), slog.String("account", k.SourceAccount), slog.String("event_id", k.EventID))
	}
	var res string
	if row.ResourceID != "" {
		res = resourceURL(message.Resource{Provider: row.Provider, SourceAccount: row.SourceAccount,
			Environment: row.Environment, Type: row.ResourceType, ID: row.ResourceID})
	}
	return c.render(ec, http.StatusOK, "event.html", row.EventID, map[string]any{"Event": row, "ResourceURL": res,
		"Payload": string(row.Payload), "PayloadURL": eventURL(k) + "?payload=1"})
}

// deadFilter reads the dead list's filters from a query or a form.
func (c *Console) deadFilter(ec echo.Context) (inbox.DeadFilter, url.Values, error) {
	v := url.Values{}
	for _, n := range []string{"provider", "account", "environment", "type", "since"} {
		if s := strings.TrimSpace(ec.FormValue(n)); s != "" {
			v.Set(n, s)
		}
	}
	since, err := parseSince(v.Get("since"), c.cfg.Now())
	f := inbox.DeadFilter{Provider: v.Get("provider"), SourceAccount: v.Get("account"), Environment: v.Get("environment"),
		EventType: v.Get("type"), Since: since}
	return f, v, err
}

// dead lists dead events, oldest first, a page at a time (keyset on the
// arrival time and the event's identity; see inbox.ListWaiting).
func (c *Console) dead(ec echo.Context) error {
	w, err := c.list(ec, "dead", "/console/dead")
	if w.Status == "" {
		return err
	}
	return c.render(ec, http.StatusOK, "dead.html", "Dead events", w)
}

// deadEstimate shows how many events a replay by the filter will touch
// before anything is replayed.
func (c *Console) deadEstimate(ec echo.Context) error {
	f, v, err := c.deadFilter(ec)
	if err != nil {
		return c.refuse(ec, http.StatusBadRequest, err.Error())
	}
	n, err := inbox.CountDead(ec.Request().Context(), c.pool, f, ReplayMaxDefault)
	if err != nil {
		return c.internal(ec, err)
	}
	return c.render(ec, http.StatusOK, "estimate.html", "Replay dead events", map[string]any{"Count": n, "Filter": v,
		"Capped": n >= ReplayMaxDefault})
}

func (c *Console) deadReplay(ec echo.Context) error {
	f, _, err := c.deadFilter(ec)
	if err != nil {
		return c.refuse(ec, http.StatusBadRequest, err.Error())
	}
	n, err := strconv.ParseInt(ec.FormValue("max"), 10, 64)
	if err != nil || n <= 0 || n > ReplayMaxDefault {
		return c.refuse(ec, http.StatusBadRequest, "max must be the estimate shown, from 1 to "+strconv.Itoa(ReplayMaxDefault))
	}
	p := job.DeadParams{Provider: f.Provider, SourceAccount: f.SourceAccount, Environment: f.Environment,
		EventType: f.EventType, Since: f.Since, Max: n}
	return c.startJob(ec, job.KindReplayDead, p)
}

func (c *Console) startJob(ec echo.Context, kind string, params any) error {
	j, err := c.cfg.Jobs.Start(ec.Request().Context(), kind, params)
	if errors.Is(err, job.ErrUnknownKind) {
		return c.refuse(ec, http.StatusServiceUnavailable, "this process cannot run "+kind+" jobs (no Kafka configured?)")
	}
	if err != nil && j.ID == 0 {
		return c.internal(ec, err)
	}
	// A job whose first step failed is recorded failed: its page says why.
	if err := audit.Record(ec.Request().Context(), c.pool, "console:"+sess(ec).principal.Name, kind,
		map[string]any{"job": j.ID, "params": params}, 0); err != nil {
		return c.internal(ec, err)
	}
	c.log.InfoContext(ec.Request().Context(), "console: job started", slog.String("principal", sess(ec).principal.Name),
		slog.String("kind", kind), slog.Int64("job", j.ID))
	return ec.Redirect(http.StatusSeeOther, fmt.Sprintf("/console/jobs/%d", j.ID))
}

func (c *Console) deadReplayOne(ec echo.Context) error {
	k := inbox.Key{Provider: ec.FormValue("provider"), SourceAccount: ec.FormValue("account"),
		Environment: ec.FormValue("environment"), EventID: ec.FormValue("event_id")}
	err := inbox.ReplayDeadEvent(ec.Request().Context(), c.pool, k)
	switch {
	case errors.Is(err, inbox.ErrNotFound):
		return c.refuse(ec, http.StatusNotFound, "no such event")
	case errors.Is(err, inbox.ErrNotDead):
		return c.refuse(ec, http.StatusConflict, "the event is no longer dead")
	case err != nil:
		return c.internal(ec, err)
	}
	if err := audit.Record(ec.Request().Context(), c.pool, "console:"+sess(ec).principal.Name, audit.ActionReplayEvent, k, 1); err != nil {
		return c.internal(ec, err)
	}
	c.log.InfoContext(ec.Request().Context(), "console: dead event replayed", slog.String("principal", sess(ec).principal.Name),
		slog.String("event_id", k.EventID))
	return ec.Redirect(http.StatusSeeOther, eventURL(k))
}

func (c *Console) parked(ec echo.Context) error {
	f := projection.ParkedFilter{Provider: ec.QueryParam("provider"), SourceAccount: ec.QueryParam("account"),
		Environment: ec.QueryParam("environment"), Limit: c.cfg.PageSize}
	rows, err := projection.ListParked(ec.Request().Context(), c.pool, f)
	if err != nil {
		return c.internal(ec, err)
	}
	links := make([]string, len(rows))
	for i, r := range rows {
		links[i] = resourceURL(r.Resource)
	}
	return c.render(ec, http.StatusOK, "parked.html", "Parked projections", map[string]any{"Rows": rows, "Links": links, "Filter": ec.QueryParams()})
}

func (c *Console) actions(ec echo.Context) error {
	since, err := parseSince(ec.QueryParam("since"), c.cfg.Now())
	if err != nil {
		return c.refuse(ec, http.StatusBadRequest, err.Error())
	}
	f := action.Filter{Status: ec.QueryParam("status"), Provider: ec.QueryParam("provider"), SourceAccount: ec.QueryParam("account"),
		Environment: ec.QueryParam("environment"), Kind: ec.QueryParam("type"), Since: since, Limit: c.cfg.PageSize}
	rows, err := action.List(ec.Request().Context(), c.pool, f)
	if err != nil {
		return c.internal(ec, err)
	}
	return c.render(ec, http.StatusOK, "actions.html", "Actions", map[string]any{"Rows": rows, "Filter": ec.QueryParams()})
}

func (c *Console) jobs(ec echo.Context) error {
	rows, err := job.List(ec.Request().Context(), c.pool, ec.QueryParam("status"), c.cfg.PageSize)
	if err != nil {
		return c.internal(ec, err)
	}
	return c.render(ec, http.StatusOK, "jobs.html", "Jobs", map[string]any{"Rows": rows, "Status": ec.QueryParam("status")})
}

func (c *Console) loadJob(ec echo.Context) (job.Job, error) {
	id, err := strconv.ParseInt(ec.Param("id"), 10, 64)
	if err != nil {
		return job.Job{}, c.refuse(ec, http.StatusBadRequest, "a job id is a number")
	}
	j, err := job.Get(ec.Request().Context(), c.pool, id)
	if errors.Is(err, job.ErrNotFound) {
		return j, c.refuse(ec, http.StatusNotFound, "no such job")
	}
	if err != nil {
		return j, c.internal(ec, err)
	}
	return j, nil
}

func (c *Console) job(ec echo.Context) error {
	j, err := c.loadJob(ec)
	if j.ID == 0 {
		return err
	}
	return c.render(ec, http.StatusOK, "job.html", fmt.Sprintf("Job %d", j.ID), j)
}

// jobProgress is what console.js polls while a job runs.
func (c *Console) jobProgress(ec echo.Context) error {
	j, err := c.loadJob(ec)
	if j.ID == 0 {
		return err
	}
	return ec.JSON(http.StatusOK, map[string]any{"status": j.Status, "progress": j.Progress, "steps": j.Steps,
		"error": j.Error, "cancel_requested": j.CancelRequested})
}

func (c *Console) cancelJob(ec echo.Context) error {
	j, err := c.loadJob(ec)
	if j.ID == 0 {
		return err
	}
	_, err = job.Cancel(ec.Request().Context(), c.pool, j.ID)
	if err != nil && !errors.Is(err, job.ErrFinished) {
		return c.internal(ec, err)
	}
	if err := audit.Record(ec.Request().Context(), c.pool, "console:"+sess(ec).principal.Name, audit.ActionJobCancel,
		map[string]any{"job": j.ID}, 0); err != nil {
		return c.internal(ec, err)
	}
	c.log.InfoContext(ec.Request().Context(), "console: job cancel requested", slog.String("principal", sess(ec).principal.Name),
		slog.Int64("job", j.ID))
	return ec.Redirect(http.StatusSeeOther, fmt.Sprintf("/console/jobs/%d", j.ID))
}

func (c *Console) partitions(ec echo.Context) error {
	rows, lagErr := c.partitionRows(ec.Request().Context())
	return c.render(ec, http.StatusOK, "partitions.html", "Partitions", map[string]any{"Rows": rows, "LagError": lagErr, "Topic": c.cfg.Topic})
}

func (c *Console) partitionReplay(ec echo.Context) error {
	p, err := strconv.ParseInt(ec.FormValue("partition"), 10, 32)
	if err != nil || p < 0 {
		return c.refuse(ec, http.StatusBadRequest, "partition must be a partition number")
	}
	since, err := parseSince(ec.FormValue("since"), c.cfg.Now())
	if err != nil || since.IsZero() {
		return c.refuse(ec, http.StatusBadRequest, "since must be a duration (2h) or an RFC 3339 time")
	}
	return c.startJob(ec, job.KindReplayPartition, job.PartitionParams{Partition: int32(p), Since: since})
}
