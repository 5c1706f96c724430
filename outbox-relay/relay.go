// Package outboxrelay publishes outbox rows to Kafka, keyed by
// provider/account/environment/resource so one resource always lands on one
// partition.
//
// Rows are claimed with FOR UPDATE SKIP LOCKED (never a cursor over ids, which
// skips rows that commit out of order), so relays run side by side. A row is
// deleted by the transaction that claims it, which commits only after the
// broker acknowledged it; a relay that dies mid-batch leaves its transaction to be
// rolled back by Postgres, and the rows go out again, which the processor
// absorbs.
//
// One relay keeps several batches in flight: it claims the next batch while
// the broker acknowledges the previous ones, and hands records to the
// producer in claim order, so records of one key reach their partition in
// outbox order. Inserts into the outbox NOTIFY the relay; it also polls, so a
// lost notification only delays a row by one poll interval.
package outboxrelay

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/outbox"
)

// Channel is the LISTEN/NOTIFY channel that wakes the relays (outbox.Channel).
const Channel = outbox.Channel

// Relay moves outbox rows to Kafka.
type Relay struct {
	pool      *pgxpool.Pool
	log       *slog.Logger
	cfg       Config
	published prometheus.Counter
	failures  prometheus.Counter
	batches   prometheus.Histogram
	dead      prometheus.Counter
	wake      chan struct{}
	// claimTimeout is ClaimTimeout as Postgres reads it (milliseconds).
	claimTimeout string

	failed    atomic.Bool // a batch put rows back since the loop last looked
	succeeded atomic.Bool // a batch committed since the loop last looked

	// recorded is topic_fence's partition count for the topic (0: none
	// recorded yet), read every PartitionCheckInterval; the partitioner
	// refuses any other count.
	recorded     atomic.Int64
	countChanged prometheus.Gauge
	refusals     prometheus.Counter
	vacuums      prometheus.Counter
	// Owned by the loop: the last check and its verdict.
	checkedAt time.Time
	agree     bool
	// ready is what Check reports: the relay reached its topic.
	ready atomic.Bool
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
			Help: "Batches that failed to publish (produce error, timeout, or database error) and stayed in the outbox."}),
		batches: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hookyard_outbox_batch_rows",
			Help: "Rows per claimed batch.", Buckets: prometheus.ExponentialBuckets(1, 4, 7)}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_outbox_dead_total",
			Help: "Outbox rows the broker refused for good (too large, invalid), moved to outbox_dead."}),
		countChanged: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hookyard_outbox_partition_count_changed",
			Help: "1 while the topic's partition count differs from the one the processors' fences recorded: the relay publishes nothing (run `hookyard fence resize`)."}),
		refusals: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_outbox_partition_refusals_total",
			Help: "Times the relay left rows in the outbox because the topic's partition count differs from the recorded one."}),
		vacuums: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_outbox_vacuums_total",
			Help: "Vacuums of the outbox the relay ran because its dead rows passed the threshold."}),
		wake:         make(chan struct{}, 1),
		agree:        true,
		claimTimeout: strconv.FormatInt(max(cfg.ClaimTimeout.Milliseconds(), 1), 10), // 0 would turn it off
	}
	cfg.Registerer.MustRegister(r.published, r.failures, r.batches, r.dead, r.countChanged, r.refusals, r.vacuums, newBacklogCollector(pool, r.log))
	return r, nil
}

// Run publishes until ctx ends. It first waits up to TopicWait for the
// brokers and the topic (see waitTopic); it returns an error when they did
// not appear by then or the Kafka client cannot be built; everything else
// is retried.
func (r *Relay) Run(ctx context.Context) error {
	pub := r.cfg.Publisher
	var admin *kgo.Client
	if pub == nil {
		cl, err := kgo.NewClient(append([]kgo.Opt{
			kgo.SeedBrokers(r.cfg.Brokers...),
			kgo.DefaultProduceTopic(r.cfg.Topic),
			kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent writes need all ISR acks
			kgo.RecordDeliveryTimeout(r.cfg.ProduceTimeout),
			kgo.ProducerLinger(0),
			// Every record in flight fits in the buffer: Produce never blocks
			// while a claim's idle-in-transaction clock runs.
			kgo.MaxBufferedRecords(max(10_000, r.cfg.BatchSize*r.cfg.InFlight)),
			kgo.RecordPartitioner(fencedPartitioner{topic: r.cfg.Topic, recorded: &r.recorded}),
		}, r.cfg.KafkaOptions...)...)
		if err != nil {
			return fmt.Errorf("outbox relay: kafka client: %w", err)
		}
		defer cl.Close()
		if err := r.waitTopic(ctx, cl); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while waiting: a normal stop
			}
			return fmt.Errorf("outbox relay: %w", err)
		}
		pub, admin = kafkaPublisher{cl}, cl
	} else {
		r.ready.Store(true)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	if !r.cfg.NoListen {
		wg.Add(1)
		go func() { defer wg.Done(); r.listen(ctx) }()
	}
	if r.cfg.VacuumDeadRows > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); r.vacuumLoop(ctx) }()
	}
	r.loop(ctx, pub, admin)
	return nil
}

// loop claims batches while rows are there, keeping up to InFlight of them
// awaiting the broker, and sleeps when the outbox is empty or a batch failed.
func (r *Relay) loop(ctx context.Context, pub Publisher, admin *kgo.Client) {
	slots := make(chan struct{}, r.cfg.InFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	var backoff time.Duration
	pause := func() {
		backoff = min(max(backoff*2, 100*time.Millisecond), r.cfg.MaxBackoff)
		sleep(ctx, backoff)
	}
	for ctx.Err() == nil {
		if r.succeeded.Swap(false) {
			backoff = 0
		}
		if r.failed.Swap(false) {
			// A batch put its rows back. Let every batch in flight settle
			// first, so the next claim starts from the lowest id again and a
			// key's put-back rows are not overtaken by later ones.
			for range r.cfg.InFlight {
				slots <- struct{}{}
			}
			for range r.cfg.InFlight {
				<-slots
			}
			pause()
			continue
		}
		if !r.partitionsAgree(ctx, admin) {
			r.refusals.Inc()
			pause()
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		b, err := r.claim(ctx)
		switch {
		case err != nil:
			<-slots
			if ctx.Err() == nil {
				r.fail(ctx, err)
				pause()
			}
			continue
		case b.n() == 0:
			<-slots
			r.idle(ctx)
			continue
		}
		b.publish(ctx, pub)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := r.finish(ctx, b); err != nil {
				r.fail(ctx, err)
				r.failed.Store(true)
				r.signal() // the loop may be idle; rolled-back rows send no NOTIFY
				return
			}
			r.succeeded.Store(true)
		}()
	}
}

// fail counts and logs a batch that left (some of) its rows in the outbox.
func (r *Relay) fail(ctx context.Context, err error) {
	r.failures.Inc()
	r.log.WarnContext(ctx, "relay batch failed; rows stay in the outbox", slog.String("error", err.Error()))
}
