// Package metrics reports the database-wide gauges an operator alerts on:
// the inbox backlog (how old its oldest unfinished event is, how many events
// are pending, retrying or dead) and the external actions not sent yet (by
// status, and how long the oldest one still to be sent has waited).
//
// The values are read from Postgres on each scrape, bounded by a short
// timeout, through partial indexes that hold only unfinished rows, by the
// statements of the packages that own those tables (inbox.CountBacklog,
// action.CountOpen). This package owns the gauges' names and labels, no
// table and no SQL; it only reads, and a slow or unreachable database makes
// the scrape report hookyard_db_gauges_up 0 instead of failing the whole
// /metrics page.
package metrics

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/inbox"
)

// TimeoutDefault is the default of Config.Timeout.
const TimeoutDefault = 2 * time.Second

// Config configures a Collector.
type Config struct {
	// Timeout bounds the queries of one scrape. Defaults to TimeoutDefault.
	Timeout time.Duration
}

var (
	oldestDesc = prometheus.NewDesc("hookyard_inbox_oldest_pending_age_seconds",
		"Age of the oldest inbox event not finished yet, by status: pending (waiting for the processor) or retrying (parked until its next attempt). 0 when there is none.",
		[]string{"status"}, nil)
	eventsDesc = prometheus.NewDesc("hookyard_inbox_events",
		"Inbox events by status: pending, retrying, dead.", []string{"status"}, nil)
	actionsDesc = prometheus.NewDesc("hookyard_actions_open",
		"External actions recorded but not sent, by kind and status: pending, sending, failed, ambiguous, dead.", []string{"kind", "status"}, nil)
	actionAgeDesc = prometheus.NewDesc("hookyard_actions_oldest_pending_age_seconds",
		"Age of the oldest external action still to be sent (pending, sending, failed or ambiguous; not dead), by kind. 0 when there is none.",
		[]string{"kind"}, nil)
	upDesc = prometheus.NewDesc("hookyard_db_gauges_up",
		"1 when the database gauges of this scrape were read, 0 when the database did not answer within the timeout.", nil, nil)
)

// Collector is a prometheus.Collector of the database gauges.
type Collector struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	cfg  Config
}

// New returns a Collector; register it with one registry per process.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config) *Collector {
	cfg.Timeout = cmp.Or(cfg.Timeout, TimeoutDefault)
	return &Collector{pool: pool, log: log, cfg: cfg}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- oldestDesc
	ch <- eventsDesc
	ch <- actionsDesc
	ch <- actionAgeDesc
	ch <- upDesc
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	// Collect gets no context from the registry; the timeout bounds it.
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	up := 1.0
	if err := c.collect(ctx, ch); err != nil {
		up = 0
		c.log.Warn("read database gauges", slog.String("error", err.Error()))
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up)
}

func (c *Collector) collect(ctx context.Context, ch chan<- prometheus.Metric) error {
	// Read everything before sending anything, so a failure never leaves a
	// half-reported scrape.
	bl, err := inbox.CountBacklog(ctx, c.pool)
	if err != nil {
		return err
	}
	acts, err := action.CountOpen(ctx, c.pool)
	if err != nil {
		return err
	}
	for _, b := range bl {
		ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.GaugeValue, float64(b.Count), b.Status)
		if b.Status != "dead" {
			ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, max(b.AgeSeconds, 0), b.Status)
		}
	}
	// Every kind the processor records, so the age gauge reads 0 (not
	// absent) once its backlog is gone.
	ages := map[string]float64{action.KindReceipt: 0}
	for _, a := range acts {
		ch <- prometheus.MustNewConstMetric(actionsDesc, prometheus.GaugeValue, float64(a.Count), a.Kind, a.Status)
		if a.Status != "dead" {
			ages[a.Kind] = max(ages[a.Kind], a.AgeSeconds)
		}
	}
	for kind, age := range ages {
		ch <- prometheus.MustNewConstMetric(actionAgeDesc, prometheus.GaugeValue, age, kind)
	}
	return nil
}
