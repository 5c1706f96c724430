package outboxrelay

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// backlogCollector reports the outbox backlog on scrape. When Postgres does
// not answer it reports hookyard_outbox_backlog_up 0 instead of failing the
// whole scrape (the failure counters matter most exactly then).
type backlogCollector struct {
	pool          *pgxpool.Pool
	log           *slog.Logger
	rows, age, up *prometheus.Desc
}

func newBacklogCollector(pool *pgxpool.Pool, log *slog.Logger) *backlogCollector {
	return &backlogCollector{pool: pool, log: log,
		rows: prometheus.NewDesc("hookyard_outbox_backlog_rows", "Rows in the outbox: committed, not yet acknowledged by Kafka (counted up to one million).", nil, nil),
		age:  prometheus.NewDesc("hookyard_outbox_oldest_age_seconds", "Age of the outbox row with the lowest id (the oldest unpublished one); 0 when the outbox is empty.", nil, nil),
		up:   prometheus.NewDesc("hookyard_outbox_backlog_up", "1 when the outbox backlog could be read on this scrape, else 0.", nil, nil),
	}
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.rows
	ch <- c.age
	ch <- c.up
}

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, age, err := Backlog(ctx, c.pool)
	if err != nil {
		c.log.Warn("read outbox backlog", slog.String("error", err.Error()))
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.rows, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, max(age, 0))
}

// backlogSQL counts the outbox up to a million rows and reads the oldest
// row's age: the lowest id is the oldest insert; both reads stay on the
// primary key.
const backlogSQL = `
SELECT (SELECT count(*) FROM (SELECT 1 FROM outbox LIMIT 1000000) o),
       coalesce((SELECT extract(epoch FROM now() - created_at)::float8 FROM outbox ORDER BY id LIMIT 1), 0)`

// Backlog reads how many rows wait in the outbox (counted up to one
// million) and how old the oldest is, in seconds (0 when empty), for the
// metrics and the console.
func Backlog(ctx context.Context, pool *pgxpool.Pool) (rows int64, ageSeconds float64, err error) {
	if err := pool.QueryRow(ctx, backlogSQL).Scan(&rows, &ageSeconds); err != nil {
		return 0, 0, fmt.Errorf("read outbox backlog: %w", err)
	}
	return rows, ageSeconds, nil
}
