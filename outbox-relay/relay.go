// Package outboxrelay publishes outbox rows to Kafka, keyed by
// provider/account/environment/resource so one resource always lands on one
// partition.
//
// Rows are claimed with FOR UPDATE SKIP LOCKED (never a cursor over ids, which
// skips rows that commit out of order), so relays run side by side. A row is
// deleted only in the transaction that saw the broker acknowledge it; a crash
// in between publishes it again, which the processor absorbs.
package outboxrelay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults of Config.
const (
	BatchSizeDefault      = 500
	IdleIntervalDefault   = 20 * time.Millisecond
	ProduceTimeoutDefault = 30 * time.Second
)

// Config configures a relay.
type Config struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Topic is the events topic. Required.
	Topic string
	// BatchSize caps the rows claimed per transaction. Defaults to BatchSizeDefault.
	BatchSize int
	// IdleInterval is the pause after finding no rows. Defaults to IdleIntervalDefault.
	IdleInterval time.Duration
	// ProduceTimeout bounds one batch's wait for the broker; past it the
	// batch is rolled back and retried. Defaults to ProduceTimeoutDefault.
	ProduceTimeout time.Duration
	// Registerer receives the metrics. Defaults to a private registry.
	Registerer prometheus.Registerer
	// KafkaOptions are appended to the producer's options.
	KafkaOptions []kgo.Opt
}

// WithDefaults returns cfg with defaults filled in.
func (c Config) WithDefaults() Config {
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.IdleInterval = cmp.Or(c.IdleInterval, IdleIntervalDefault)
	c.ProduceTimeout = cmp.Or(c.ProduceTimeout, ProduceTimeoutDefault)
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

func (c Config) validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("outbox relay config: Brokers is required")
	}
	if c.Topic == "" {
		return errors.New("outbox relay config: Topic is required")
	}
	return nil
}

// Relay moves outbox rows to Kafka.
type Relay struct {
	pool      *pgxpool.Pool
	log       *slog.Logger
	cfg       Config
	published prometheus.Counter
	failures  prometheus.Counter
	lag       prometheus.Gauge
}

// New builds a relay; Run starts it.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config) (*Relay, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Relay{pool: pool, log: log.With(slog.String("service", "outbox-relay")), cfg: cfg,
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_outbox_published_total",
			Help: "Outbox rows acknowledged by Kafka and removed."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_outbox_publish_failures_total",
			Help: "Batches that failed to publish and were left in the outbox."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hookyard_outbox_oldest_age_seconds",
			Help: "Age of the oldest row in the last claimed batch."}),
	}
	cfg.Registerer.MustRegister(r.published, r.failures, r.lag)
	return r, nil
}

// Run publishes until ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(r.cfg.Brokers...),
		kgo.DefaultProduceTopic(r.cfg.Topic),
		kgo.ProducerLinger(0),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}, r.cfg.KafkaOptions...)...)
	if err != nil {
		return fmt.Errorf("outbox relay: kafka client: %w", err)
	}
	defer cl.Close()
	delay := r.cfg.IdleInterval
	for {
		n, err := r.RelayOnce(ctx, cl)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case err != nil:
			r.failures.Inc()
			r.log.WarnContext(ctx, "relay batch failed; rows stay in the outbox", slog.String("error", err.Error()))
			delay = min(max(delay*2, 100*time.Millisecond), 5*time.Second)
		case n == 0:
			delay = r.cfg.IdleInterval
		default:
			delay = 0
		}
		if delay > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(delay):
			}
		}
	}
}

const claimSQL = `
SELECT id, message_key, message::text, created_at FROM outbox
ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`

// RelayOnce claims one batch, publishes it in order and removes it once the
// broker acknowledged every record. It returns how many rows it published.
func (r *Relay) RelayOnce(ctx context.Context, cl *kgo.Client) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, claimSQL, r.cfg.BatchSize)
		if err != nil {
			return fmt.Errorf("claim outbox rows: %w", err)
		}
		var ids []int64
		var recs []*kgo.Record
		var oldest time.Time
		for rows.Next() {
			var id int64
			var key, msg string
			var created time.Time
			if err := rows.Scan(&id, &key, &msg, &created); err != nil {
				rows.Close()
				return fmt.Errorf("read outbox row: %w", err)
			}
			if oldest.IsZero() {
				oldest = created
			}
			ids = append(ids, id)
			recs = append(recs, &kgo.Record{Key: []byte(key), Value: []byte(msg)})
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("claim outbox rows: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		r.lag.Set(time.Since(oldest).Seconds())
		// The claim's transaction stays open until the broker answers; bound
		// it, so a Kafka outage does not hold row locks (and vacuum) forever.
		pctx, cancel := context.WithTimeout(ctx, r.cfg.ProduceTimeout)
		defer cancel()
		if err := cl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("publish %d outbox rows: %w", len(recs), err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE id = ANY($1)`, ids); err != nil {
			return fmt.Errorf("remove published outbox rows: %w", err)
		}
		n = len(ids)
		return nil
	})
	if err != nil {
		return 0, err
	}
	r.published.Add(float64(n))
	return n, nil
}
