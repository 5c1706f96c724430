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
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/topic"
)

// Channel is the LISTEN/NOTIFY channel an outbox insert notifies.
const Channel = "hookyard_outbox"

// Defaults of Config.
const (
	BatchSizeDefault      = 2000
	InFlightDefault       = 4
	PollIntervalDefault   = time.Second
	ProduceTimeoutDefault = 30 * time.Second
	MaxBackoffDefault     = 5 * time.Second
	// PartitionCheckIntervalDefault bounds how long a relay keeps
	// publishing after the topic's partition count changed.
	PartitionCheckIntervalDefault = 10 * time.Second
	// ShutdownGrace is how long a stopping relay waits for the broker to
	// answer records already sent to it.
	ShutdownGrace = 5 * time.Second
)

// Config configures a relay.
type Config struct {
	// Brokers are the Kafka seed brokers. Required unless Publisher is set.
	Brokers []string
	// Topic is the events topic. Required unless Publisher is set.
	Topic string
	// BatchSize caps the rows claimed per transaction. Defaults to BatchSizeDefault.
	BatchSize int
	// InFlight caps the batches awaiting the broker's acknowledgement; each
	// holds one pool connection. Defaults to InFlightDefault.
	InFlight int
	// PollInterval is how long an idle relay waits for a notification
	// before it looks at the outbox anyway. Defaults to PollIntervalDefault.
	PollInterval time.Duration
	// ProduceTimeout bounds one batch's wait for the broker: the producer
	// gives up on a record after it, and the batch is rolled back and
	// retried. At least 1s; defaults to ProduceTimeoutDefault.
	ProduceTimeout time.Duration
	// ClaimTimeout is how long Postgres lets a claim's transaction sit idle
	// (idle_in_transaction_session_timeout) before it ends the session and
	// releases the rows: a frozen relay cannot hold them forever. Defaults to
	// ProduceTimeout plus 30s.
	ClaimTimeout time.Duration
	// MaxBackoff caps the pause after failed batches. Defaults to MaxBackoffDefault.
	MaxBackoff time.Duration
	// PartitionCheckInterval is how often the relay compares the topic's
	// partition count with the one the processors' fences recorded
	// (topic_fence); while they differ it publishes nothing. Defaults to
	// PartitionCheckIntervalDefault.
	PartitionCheckInterval time.Duration
	// NoListen turns LISTEN/NOTIFY off; the relay only polls.
	NoListen bool
	// Registerer receives the metrics. Defaults to a private registry.
	Registerer prometheus.Registerer
	// KafkaOptions are appended to the producer's options.
	KafkaOptions []kgo.Opt
	// Publisher replaces the Kafka producer (the bench measures Postgres
	// alone with one that acknowledges at once).
	Publisher Publisher
}

// Publisher hands records to the broker; done is called once per record,
// from any goroutine, when the broker acknowledged it or gave up on it.
type Publisher interface {
	Publish(ctx context.Context, r *kgo.Record, done func(*kgo.Record, error))
}

// WithDefaults returns cfg with defaults filled in.
func (c Config) WithDefaults() Config {
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.InFlight = cmp.Or(c.InFlight, InFlightDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.ProduceTimeout = max(cmp.Or(c.ProduceTimeout, ProduceTimeoutDefault), time.Second) // the client's minimum
	c.MaxBackoff = cmp.Or(c.MaxBackoff, MaxBackoffDefault)
	c.PartitionCheckInterval = cmp.Or(c.PartitionCheckInterval, PartitionCheckIntervalDefault)
	c.ClaimTimeout = cmp.Or(c.ClaimTimeout, c.ProduceTimeout+30*time.Second)
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Publisher == nil && len(c.Brokers) == 0:
		return errors.New("outbox relay config: Brokers is required")
	case c.Publisher == nil && c.Topic == "":
		return errors.New("outbox relay config: Topic is required")
	case c.BatchSize < 1 || c.InFlight < 1:
		return errors.New("outbox relay config: BatchSize and InFlight must be positive")
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
	// Owned by the loop: the last check and its verdict.
	checkedAt time.Time
	agree     bool
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
		wake:         make(chan struct{}, 1),
		agree:        true,
		claimTimeout: strconv.FormatInt(max(cfg.ClaimTimeout.Milliseconds(), 1), 10), // 0 would turn it off
	}
	cfg.Registerer.MustRegister(r.published, r.failures, r.batches, r.dead, r.countChanged, r.refusals, newBacklogCollector(pool, r.log))
	return r, nil
}

// Run publishes until ctx ends. It returns an error only when the Kafka
// client cannot be built; everything else is retried.
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
			kgo.RecordPartitioner(fencedPartitioner{recorded: &r.recorded}),
		}, r.cfg.KafkaOptions...)...)
		if err != nil {
			return fmt.Errorf("outbox relay: kafka client: %w", err)
		}
		defer cl.Close()
		pub, admin = kafkaPublisher{cl}, cl
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	if !r.cfg.NoListen {
		wg.Add(1)
		go func() { defer wg.Done(); r.listen(ctx) }()
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

// partitionsAgree says whether the topic's partition count is the one the
// fences recorded, checking at most every PartitionCheckInterval. Partitions
// added under running services (an admin tool, an autoscaler, `fence resize
// -force`) move keys to other partitions while their backlog sits on the old
// ones; publishing then would hand one resource to two workers with
// independent fences. Until the fences record the new count, rows wait in
// the outbox. With no Kafka client (a Publisher of the caller's) there is no
// topic to compare.
func (r *Relay) partitionsAgree(ctx context.Context, admin *kgo.Client) bool {
	if admin == nil || time.Since(r.checkedAt) < r.cfg.PartitionCheckInterval {
		return r.agree
	}
	r.checkedAt = time.Now()
	var recorded int
	err := r.pool.QueryRow(ctx, `SELECT partition_count FROM topic_fence WHERE topic = $1`, r.cfg.Topic).Scan(&recorded)
	if errors.Is(err, pgx.ErrNoRows) {
		// No processor registered the topic yet: nothing to disagree with.
		r.recorded.Store(0)
		r.setAgree(ctx, true, 0, 0)
		return true
	}
	if err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "read the recorded partition count; keeping the last verdict", slog.String("error", err.Error()))
		}
		return r.agree
	}
	if r.recorded.Swap(int64(recorded)) != int64(recorded) {
		// The producer hashes over the count in its own metadata, which it
		// refreshes only every few minutes: have it read the topic now, or
		// the partitioner would refuse every record until then.
		admin.ForceMetadataRefresh()
	}
	n, err := topic.Partitions(ctx, admin, r.cfg.Topic)
	if err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "read the topic's partition count; keeping the last verdict", slog.String("error", err.Error()))
		}
		return r.agree
	}
	r.setAgree(ctx, n == recorded, n, recorded)
	return r.agree
}

func (r *Relay) setAgree(ctx context.Context, agree bool, n, recorded int) {
	switch {
	case !agree && r.agree:
		r.log.ErrorContext(ctx, "refusing to publish: the topic's partition count differs from the one the fences recorded; rows stay in the outbox until `hookyard fence resize` records it (see the README's \"Resizing the topic\")",
			slog.String("topic", r.cfg.Topic), slog.Int("partitions", n), slog.Int("recorded", recorded))
		r.countChanged.Set(1)
	case agree && !r.agree:
		r.log.InfoContext(ctx, "the topic's partition count matches the recorded one again; publishing", slog.Int("partitions", n))
		r.countChanged.Set(0)
	}
	r.agree = agree
}

// fencedPartitioner hashes keys as Kafka's default partitioner does
// (murmur2), over the partition count the fences recorded only. Between two
// checks the producer's metadata may already show a grown topic; a record
// it would hash over that count fails instead (its row goes back to the
// outbox).
type fencedPartitioner struct{ recorded *atomic.Int64 }

func (p fencedPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	return fencedTopicPartitioner{recorded: p.recorded, TopicPartitioner: kgo.StickyKeyPartitioner(nil).ForTopic(t)}
}

type fencedTopicPartitioner struct {
	recorded *atomic.Int64
	kgo.TopicPartitioner
}

func (p fencedTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if want := p.recorded.Load(); want > 0 && int64(n) != want {
		return -1 // franz-go fails the record: "invalid record partitioning choice"
	}
	return p.TopicPartitioner.Partition(r, n)
}

// fail counts and logs a batch that left (some of) its rows in the outbox.
func (r *Relay) fail(ctx context.Context, err error) {
	r.failures.Inc()
	r.log.WarnContext(ctx, "relay batch failed; rows stay in the outbox", slog.String("error", err.Error()))
}

// idle waits for a notification (or a failed batch's wake-up) or the poll interval.
func (r *Relay) idle(ctx context.Context) {
	t := time.NewTimer(r.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-r.wake:
	case <-t.C:
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// listen keeps a connection LISTENing on Channel and turns notifications
// into wake-ups; when the connection breaks it reconnects with a pause, and
// the relay polls meanwhile.
func (r *Relay) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		r.log.WarnContext(ctx, "outbox notifications lost; polling until the listener reconnects", slog.String("error", err.Error()))
		sleep(ctx, r.cfg.PollInterval)
	}
}

func (r *Relay) listenOnce(ctx context.Context) error {
	pc, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A LISTENing connection must not go back to the pool.
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	r.signal() // rows may have arrived before LISTEN took effect
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == schema { // the payload is the schema of the outbox written to
			r.signal()
		}
	}
}

func (r *Relay) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// batch is one claim: its transaction has deleted the rows and stays open
// until every record is acknowledged, then commits; on any failure it rolls
// back and the rows are back in the outbox.
type batch struct {
	conn    *pgxpool.Conn
	ids     []int64
	recs    []*kgo.Record
	created []time.Time
	pending sync.WaitGroup

	mu     sync.Mutex
	err    error   // the first failure a retry may cure
	failed []bool  // by position: the record was not acknowledged
	poison []error // by position: the broker can never take the record
}

func (b *batch) n() int { return len(b.ids) }

// claimSQL takes the lowest ids no other relay holds and deletes them in the
// same statement; the rows stay locked (and invisible to nobody else) until
// the transaction ends. The claimed ids reach the DELETE as one array, so
// it finds them by the primary key: joined as a CTE instead, the planner
// hashed the whole outbox for every batch (on a table without statistics,
// and with them), and each claim cost as much as the backlog was long.
const claimSQL = `
DELETE FROM outbox
WHERE id = ANY (ARRAY(SELECT id FROM outbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED))
RETURNING id, message_key, message, created_at`

// claim opens a transaction and deletes the next rows no other relay holds,
// in one round trip. On no rows or an error the transaction is already
// closed and the connection released.
func (r *Relay) claim(ctx context.Context) (*batch, error) {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim outbox rows: %w", err)
	}
	b := &batch{conn: conn}
	if err := r.scan(ctx, b); err != nil || b.n() == 0 {
		sctx, cancel := settleCtx(ctx)
		defer cancel()
		_ = b.end(sctx, false)
		return &batch{}, err
	}
	r.batches.Observe(float64(b.n()))
	return b, nil
}

func (r *Relay) scan(ctx context.Context, b *batch) error {
	q := &pgx.Batch{}
	q.Queue("BEGIN")
	q.Queue(`SELECT set_config('idle_in_transaction_session_timeout', $1, true)`, r.claimTimeout)
	q.Queue(claimSQL, r.cfg.BatchSize)
	br := b.conn.SendBatch(ctx, q)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("claim outbox rows: %w", err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("claim outbox rows: %w", err)
	}
	defer rows.Close()
	type row struct {
		id       int64
		key, msg []byte
		created  time.Time
	}
	got := make([]row, 0, r.cfg.BatchSize)
	for rows.Next() {
		var rw row
		if err := rows.Scan(&rw.id, &rw.key, &rw.msg, &rw.created); err != nil {
			return fmt.Errorf("read outbox row: %w", err)
		}
		got = append(got, rw)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("claim outbox rows: %w", err)
	}
	// RETURNING has no order; records go out in outbox order.
	slices.SortFunc(got, func(a, b row) int { return cmp.Compare(a.id, b.id) })
	b.ids = make([]int64, len(got))
	b.recs = make([]*kgo.Record, len(got))
	b.created = make([]time.Time, len(got))
	b.failed = make([]bool, len(got))
	b.poison = make([]error, len(got))
	for i, rw := range got {
		b.ids[i] = rw.id
		b.recs[i] = &kgo.Record{Key: rw.key, Value: rw.msg}
		b.created[i] = rw.created
	}
	return br.Close()
}

// end commits or rolls back the claim's transaction and releases the
// connection (a connection left in a transaction is closed by the pool).
// ctx must outlive the relay's own context: see settleCtx.
func (b *batch) end(ctx context.Context, commit bool) error {
	if b.conn == nil {
		return nil
	}
	conn := b.conn
	b.conn = nil // ended once, whatever happens below
	defer conn.Release()
	if commit {
		_, err := conn.Exec(ctx, "COMMIT")
		return err
	}
	_, err := conn.Exec(ctx, "ROLLBACK")
	return err
}

// publish hands the batch's records to the producer, in claim order.
func (b *batch) publish(ctx context.Context, pub Publisher) {
	b.pending.Add(len(b.recs))
	for i, rec := range b.recs {
		span := startPublish(ctx, rec)
		pub.Publish(ctx, rec, func(r *kgo.Record, err error) { endPublish(span, r, err); b.done(i, err) })
	}
}

func (b *batch) done(i int, err error) {
	if err != nil {
		b.mu.Lock()
		b.failed[i] = true
		switch {
		case poisonous(err):
			b.poison[i] = err
		case b.err == nil:
			b.err = err
		}
		b.mu.Unlock()
	}
	b.pending.Done()
}

// poisonous says the broker refused the record itself, so retrying cannot
// help: it is moved to outbox_dead rather than blocking the outbox head.
func poisonous(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.InvalidRecord) || errors.Is(err, kerr.CorruptMessage)
}

// settleCtx bounds the statements that end a claim; they run even while the
// relay stops, so that nothing is left half done.
func settleCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

// finish waits for the producer's answer for every record, then commits (the
// rows were deleted by the claim), or puts back the rows that failed. It
// returns an error when rows went back to the outbox.
//
// It does not roll back on a timer of its own: the producer fails a record
// only when it is not in flight (RecordDeliveryTimeout), so acting on its
// answer does not publish rows twice. A claim the producer never answers
// ends after ClaimTimeout, when Postgres releases it anyway. When the relay
// stops, records not yet sent fail at once (their context ends) and go back;
// records in flight get ShutdownGrace.
func (r *Relay) finish(ctx context.Context, b *batch) error {
	acked := make(chan struct{})
	go func() { b.pending.Wait(); close(acked) }()
	t := time.NewTimer(r.cfg.ClaimTimeout)
	defer t.Stop()
	var err error
	select {
	case <-acked:
	case <-t.C:
		err = fmt.Errorf("no answer from the producer within the claim timeout %s", r.cfg.ClaimTimeout)
	case <-ctx.Done():
		select {
		case <-acked:
		case <-time.After(ShutdownGrace):
			err = errors.New("relay stopped before the broker acknowledged")
		}
	}
	sctx, cancel := settleCtx(ctx)
	defer cancel()
	if err != nil { // records may still be produced: keep every row
		_ = b.end(sctx, false)
		return fmt.Errorf("publish %d outbox rows: %w", b.n(), err)
	}
	b.mu.Lock()
	err = b.err
	b.mu.Unlock()
	ok, dead, settleErr := b.settle(sctx)
	if settleErr != nil {
		_ = b.end(sctx, false)
		return fmt.Errorf("settle %d published outbox rows: %w", b.n(), settleErr)
	}
	r.published.Add(float64(ok))
	if dead > 0 {
		r.dead.Add(float64(dead))
		r.log.ErrorContext(ctx, "the broker refused outbox rows for good; moved to outbox_dead",
			slog.Int("rows", dead), slog.String("error", b.firstPoison().Error()))
	}
	if err != nil {
		return fmt.Errorf("publish %d of %d outbox rows: %w", b.n()-ok-dead, b.n(), err)
	}
	return nil
}

func (b *batch) firstPoison() error {
	for _, e := range b.poison {
		if e != nil {
			return e
		}
	}
	return nil
}

// settle ends a batch whose records all have an answer: acknowledged rows
// stay deleted; rows that failed go back to the outbox under their own ids
// (so the acknowledged ones are not published twice), and rows the broker
// refused for good go to outbox_dead. It returns how many were acknowledged
// and how many went dead.
func (b *batch) settle(ctx context.Context) (ok, dead int, err error) {
	var back, gone rowSet
	for i, f := range b.failed {
		switch {
		case !f:
			ok++
		case b.poison[i] != nil:
			gone.add(b, i, b.poison[i].Error())
		default:
			back.add(b, i, "")
		}
	}
	if ok == 0 && len(gone.ids) == 0 {
		return 0, 0, b.end(ctx, false) // nothing went out: the rollback puts everything back
	}
	if len(back.ids) > 0 {
		if _, err := b.conn.Exec(ctx, `
INSERT INTO outbox (id, message_key, message, created_at)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[])`, back.ids, back.keys, back.msgs, back.created); err != nil {
			return 0, 0, err
		}
	}
	if len(gone.ids) > 0 {
		if _, err := b.conn.Exec(ctx, `
INSERT INTO outbox_dead (id, message_key, message, created_at, error)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[], $5::text[])
-- Moved here before and copied back without a DELETE: refused again, it
-- updates its dead row; a duplicate key would fail the whole batch forever.
ON CONFLICT (id) DO UPDATE SET message_key = EXCLUDED.message_key, message = EXCLUDED.message,
    created_at = EXCLUDED.created_at, error = EXCLUDED.error, failed_at = now()`, gone.ids, gone.keys, gone.msgs, gone.created, gone.errs); err != nil {
			return 0, 0, err
		}
	}
	return ok, len(gone.ids), b.end(ctx, true)
}

// rowSet is claimed rows in the column form unnest takes.
type rowSet struct {
	ids              []int64
	keys, msgs, errs []string
	created          []time.Time
}

func (s *rowSet) add(b *batch, i int, errText string) {
	s.ids = append(s.ids, b.ids[i])
	s.keys = append(s.keys, string(b.recs[i].Key))
	s.msgs = append(s.msgs, string(b.recs[i].Value))
	s.created = append(s.created, b.created[i])
	s.errs = append(s.errs, errText)
}

// kafkaPublisher produces through a franz-go client. The client keeps the
// order of Produce calls per partition, and its idempotent producer keeps it
// across retries.
type kafkaPublisher struct{ cl *kgo.Client }

func (p kafkaPublisher) Publish(ctx context.Context, r *kgo.Record, done func(*kgo.Record, error)) {
	p.cl.Produce(ctx, r, done)
}

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
	var n int64
	var age float64
	// The lowest id is the oldest insert; both reads stay on the primary key.
	err := c.pool.QueryRow(ctx, `
SELECT (SELECT count(*) FROM (SELECT 1 FROM outbox LIMIT 1000000) o),
       coalesce((SELECT extract(epoch FROM now() - created_at)::float8 FROM outbox ORDER BY id LIMIT 1), 0)`).Scan(&n, &age)
	if err != nil {
		c.log.Warn("read outbox backlog", slog.String("error", err.Error()))
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.rows, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, max(age, 0))
}
