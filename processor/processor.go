package processor

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/fence"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/topic"
)

// Defaults of Config.
const (
	TopicDefault = "hookyard.events"
	GroupDefault = "hookyard-processor"
	// RetryWindowDefault is Stripe's own retry horizon for webhooks: a
	// provider incident shorter than that never needs an operator.
	RetryWindowDefault   = 72 * time.Hour
	BackoffBaseDefault   = 2 * time.Second
	BackoffMaxDefault    = 10 * time.Minute
	RevokeGraceDefault   = 10 * time.Second
	RetryIntervalDefault = time.Second
	// PartitionCheckIntervalDefault bounds how long a running processor
	// takes to notice that the topic's partition count changed.
	PartitionCheckIntervalDefault = 30 * time.Second
	// TopicWaitDefault is how long a starting processor waits for its
	// topic (or its brokers) to appear.
	TopicWaitDefault        = 2 * time.Minute
	MaxPollRecordsDefault   = 1000
	FetchConcurrencyDefault = 8
	// SessionTimeoutDefault is how long the group coordinator waits for a
	// silent member (killed, frozen, cut off) before it hands its
	// partitions to the others: a processor killed with -9 stalls its
	// partitions about this long. It is Kafka's default
	// group.min.session.timeout.ms, the lowest a stock broker accepts
	// (franz-go's own default is 45 s).
	SessionTimeoutDefault = 6 * time.Second
	// HeartbeatIntervalDefault keeps several heartbeats inside one session
	// timeout, so a single late one does not end the membership.
	HeartbeatIntervalDefault = time.Second
	// RebalanceTimeoutDefault bounds how long members may take to rejoin
	// once a rebalance began; it exceeds RevokeGraceDefault plus two offset
	// commits (the one in flight and the revoked partitions' own), so a
	// revoked worker's grace never gets the member kicked.
	RebalanceTimeoutDefault = 30 * time.Second
)

// commitTimeout bounds one offset commit request.
const commitTimeout = 5 * time.Second

// Config configures a processor.
type Config struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Topic is the events topic. Defaults to TopicDefault.
	Topic string
	// Group is the consumer group. Defaults to GroupDefault.
	Group string
	// InstanceID names this processor in fences and logs. Defaults to
	// host-pid-random.
	InstanceID string
	// Endpoints are the configured endpoints; their options (incremental,
	// JSON paths) steer processing.
	Endpoints []provider.Endpoint
	// Fetchers read current state per provider name, for events without a
	// version. Defaults to none: such hints are recorded, not fetched.
	Fetchers map[string]provider.Fetcher
	// RetryWindow is how long a failing event is retried, from its first
	// failure (a replay starts a new window). An event still failing when
	// it ends is dead, and a dead hint marks its projection
	// needs_reconcile. Defaults to RetryWindowDefault.
	RetryWindow time.Duration
	// MaxAttempts, when above 0, also ends retries after that many
	// attempts that reached the provider (tries refused by the breaker or
	// the local rate limiter, ErrNotAttempted, do not count). Defaults to
	// 0: the window alone decides.
	MaxAttempts int
	// BackoffBase is the first retry's delay. Later delays grow with the
	// time the event has been failing (each about the time failed so far,
	// with jitter), so they double per try. Defaults to BackoffBaseDefault.
	BackoffBase time.Duration
	// BackoffMax caps the retry delay: after a long outage an event is
	// applied at most this long after the provider is back. Defaults to
	// BackoffMaxDefault.
	BackoffMax time.Duration
	// RevokeGrace bounds how long a revoked partition's worker may finish its
	// batch before the rebalance goes on without it; the fence keeps it from
	// writing afterwards. Defaults to RevokeGraceDefault.
	RevokeGrace time.Duration
	// RetryInterval is how often due retries are re-enqueued. Defaults to
	// RetryIntervalDefault.
	RetryInterval time.Duration
	// PartitionCheckInterval is how often the topic's partition count is
	// compared with the fenced one while the processor runs. Defaults to
	// PartitionCheckIntervalDefault.
	PartitionCheckInterval time.Duration
	// TopicWait is how long a starting processor waits for the topic to
	// exist and the brokers to answer: services are started in any order
	// (a Kubernetes rollout, docker compose), and the topic may be created
	// by another process a moment later. Meanwhile it is not ready; then it
	// fails with the last error. Defaults to TopicWaitDefault.
	TopicWait time.Duration
	// SessionTimeout is how long the group coordinator keeps a member that
	// stopped heartbeating; then its partitions go to the other members.
	// Lower means a killed or frozen processor's partitions resume sooner;
	// the price is that a live processor silent for longer (a long GC
	// pause, a stalled host, a network partition) loses its partitions
	// too. That is safe, not only slow: the member that takes a partition
	// bumps its fence, so the paused one cannot write when it wakes up
	// (invariant 6) and rejoins. It must lie within the broker's
	// group.min.session.timeout.ms and group.max.session.timeout.ms (6 s
	// and 30 min on a stock broker). Defaults to SessionTimeoutDefault.
	SessionTimeout time.Duration
	// HeartbeatInterval is how often the member heartbeats; at most a third
	// of SessionTimeout. Defaults to HeartbeatIntervalDefault.
	HeartbeatInterval time.Duration
	// RebalanceTimeout bounds how long members may take to rejoin once a
	// rebalance began (Kafka's rebalance.timeout.ms); it must exceed
	// RevokeGrace plus two offset commits. Defaults to RebalanceTimeoutDefault.
	RebalanceTimeout time.Duration
	// MaxPollRecords caps one poll. Defaults to MaxPollRecordsDefault.
	MaxPollRecords int
	// FetchConcurrency bounds a worker's concurrent provider fetches for
	// distinct resources of one batch. Defaults to FetchConcurrencyDefault.
	FetchConcurrency int
	// Registerer receives the metrics. Defaults to a private registry.
	Registerer prometheus.Registerer
	// KafkaOptions are appended to the client's options (tests, TLS, SASL).
	KafkaOptions []kgo.Opt
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// WithDefaults returns cfg with defaults filled in.
func (c Config) WithDefaults() Config {
	c.Topic = cmp.Or(c.Topic, TopicDefault)
	c.Group = cmp.Or(c.Group, GroupDefault)
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		var b [3]byte
		_, _ = rand.Read(b[:])
		c.InstanceID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	c.RetryWindow = cmp.Or(c.RetryWindow, RetryWindowDefault)
	c.BackoffBase = cmp.Or(c.BackoffBase, BackoffBaseDefault)
	c.BackoffMax = cmp.Or(c.BackoffMax, BackoffMaxDefault)
	c.RevokeGrace = cmp.Or(c.RevokeGrace, RevokeGraceDefault)
	c.RetryInterval = cmp.Or(c.RetryInterval, RetryIntervalDefault)
	c.PartitionCheckInterval = cmp.Or(c.PartitionCheckInterval, PartitionCheckIntervalDefault)
	c.TopicWait = cmp.Or(c.TopicWait, TopicWaitDefault)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, SessionTimeoutDefault)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, HeartbeatIntervalDefault)
	c.RebalanceTimeout = cmp.Or(c.RebalanceTimeout, RebalanceTimeoutDefault)
	c.MaxPollRecords = cmp.Or(c.MaxPollRecords, MaxPollRecordsDefault)
	c.FetchConcurrency = cmp.Or(c.FetchConcurrency, FetchConcurrencyDefault)
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("processor config: Brokers is required")
	}
	if c.MaxAttempts < 0 {
		return errors.New("processor config: MaxAttempts must not be negative (0: no cap, the retry window decides)")
	}
	if c.RetryWindow < 0 || c.BackoffBase < 0 || c.BackoffMax < 0 {
		return errors.New("processor config: RetryWindow, BackoffBase and BackoffMax must not be negative")
	}
	if c.HeartbeatInterval*3 > c.SessionTimeout {
		return fmt.Errorf("processor config: HeartbeatInterval (%s) must be at most a third of SessionTimeout (%s)", c.HeartbeatInterval, c.SessionTimeout)
	}
	// A revoke may take RevokeGrace, then wait for an offset commit in
	// flight and make its own.
	if c.RebalanceTimeout <= c.RevokeGrace+2*commitTimeout {
		return fmt.Errorf("processor config: RebalanceTimeout (%s) must exceed RevokeGrace (%s) plus two offset commits (%s)",
			c.RebalanceTimeout, c.RevokeGrace, 2*commitTimeout)
	}
	return nil
}

// Processor is one member of the processor consumer group.
type Processor struct {
	pool      *pgxpool.Pool
	log       *slog.Logger
	cfg       Config
	metrics   *metrics
	endpoints map[string]*provider.Endpoint

	partitions int

	mu      sync.Mutex
	workers map[int32]*worker
	// cl and owned are what the consumer lag collector reads: the group
	// client while Run runs, and the partitions assigned to it (with or
	// without a running worker).
	cl    *kgo.Client
	owned map[int32]struct{}
	// offsets commits the session's offsets (nil between sessions).
	offsets *offsets
	// fatal ends Run: a condition no retry fixes (the partition count
	// changed under a running processor).
	fatalOnce sync.Once
	fatalErr  error
	// stopPoll ends the current session's poll; rejoin says why when a
	// fenced worker asked for it.
	stopPoll context.CancelFunc
	rejoin   bool
	// Ready is closed once the processor joined and checked the topic.
	ready     chan struct{}
	readyOnce sync.Once
}

// New builds a processor; Run starts it.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config) (*Processor, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Processor{pool: pool, log: log.With(slog.String("service", "processor"), slog.String("instance", cfg.InstanceID)),
		cfg: cfg, metrics: newMetrics(cfg.Registerer), endpoints: map[string]*provider.Endpoint{},
		workers: map[int32]*worker{}, owned: map[int32]struct{}{}, ready: make(chan struct{})}
	for i := range cfg.Endpoints {
		p.endpoints[cfg.Endpoints[i].ID] = &cfg.Endpoints[i]
	}
	if err := cfg.Registerer.Register(lagCollector{p}); err != nil {
		return nil, fmt.Errorf("processor: register consumer lag metric: %w", err)
	}
	return p, nil
}

// Ready is closed once the processor checked the topic's fence and started
// polling.
func (p *Processor) Ready() <-chan struct{} { return p.ready }

// Run consumes until ctx ends. It refuses to start when the topic's
// partition count differs from the fenced one, and stops with an error
// wrapping fence.ErrPartitionCountChanged when the count changes while it
// runs (see watchPartitions): keys would map to other partitions than the
// ones the fences guard.
func (p *Processor) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the sweeper and the partition watcher with Run
	admin, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(p.cfg.Brokers...)}, p.cfg.KafkaOptions...)...)
	if err != nil {
		return fmt.Errorf("processor: kafka admin client: %w", err)
	}
	// The watcher stops before its client closes.
	defer func() { cancel(); admin.Close() }()
	n, err := p.waitTopic(ctx, admin)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting: a normal stop
		}
		return fmt.Errorf("processor: %w", err)
	}
	if err := fence.Register(ctx, p.pool, p.cfg.Topic, n); err != nil {
		if errors.Is(err, fence.ErrPartitionCountChanged) {
			p.countChanged(ctx, err)
		}
		return fmt.Errorf("processor: %w", err)
	}
	p.partitions = n
	go p.retryLoop(ctx)
	go p.watchPartitions(ctx, admin)
	p.log.InfoContext(ctx, "processor started", slog.String("topic", p.cfg.Topic), slog.Int("partitions", n),
		slog.Duration("retry_window", p.cfg.RetryWindow))
	if p.cfg.MaxAttempts > 0 {
		p.log.WarnContext(ctx, "processor.max_attempts is set: events die after that many provider attempts even within the retry window; remove it to retry for the whole window",
			slog.Int("max_attempts", p.cfg.MaxAttempts), slog.Duration("retry_window", p.cfg.RetryWindow))
	}
	for {
		rejoin, err := p.session(ctx)
		if err != nil || !rejoin || ctx.Err() != nil {
			return err
		}
		p.metrics.rejoins.WithLabelValues("fenced").Inc()
		p.log.InfoContext(ctx, "rejoining the group: a fenced partition resumes under a fresh fence")
	}
}

// waitTopic reads the topic's partition count, waiting up to TopicWait while
// the topic does not exist yet or the brokers do not answer.
func (p *Processor) waitTopic(ctx context.Context, admin *kgo.Client) (int, error) {
	deadline := time.Now().Add(p.cfg.TopicWait)
	delay := 250 * time.Millisecond
	var logged time.Time
	for {
		n, err := topic.Partitions(ctx, admin, p.cfg.Topic)
		if err == nil {
			return n, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if time.Now().Add(delay).After(deadline) {
			return 0, err
		}
		if time.Since(logged) > 30*time.Second {
			logged = time.Now()
			p.log.WarnContext(ctx, "waiting for the topic", slog.String("topic", p.cfg.Topic),
				slog.Duration("up_to", time.Until(deadline).Round(time.Second)), slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// session is one membership in the group: it joins, consumes until ctx
// ends, the processor fails for good, or a worker was fenced while its
// partition was still assigned here (rejoin true). Leaving and joining again
// is how that partition comes back: its fence may be re-taken only on a
// fresh assignment, never by a retry that could bump past a newer owner.
func (p *Processor) session(ctx context.Context) (rejoin bool, err error) {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(p.cfg.Brokers...),
		kgo.ConsumerGroup(p.cfg.Group),
		kgo.ConsumeTopics(p.cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(p.assigned),
		kgo.OnPartitionsRevoked(p.revoked),
		kgo.OnPartitionsLost(p.lost),
		kgo.FetchMaxWait(250 * time.Millisecond),
		kgo.SessionTimeout(p.cfg.SessionTimeout),
		kgo.HeartbeatInterval(p.cfg.HeartbeatInterval),
		kgo.RebalanceTimeout(p.cfg.RebalanceTimeout),
	}, p.cfg.KafkaOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return false, fmt.Errorf("processor: kafka client: %w", err)
	}
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	off := newOffsets(cl, p.log, p.metrics, commitTimeout)
	commitCtx, stopCommits := context.WithCancel(context.WithoutCancel(ctx))
	committed := make(chan struct{})
	go func() { defer close(committed); off.run(commitCtx) }()
	p.mu.Lock()
	p.cl, p.stopPoll, p.rejoin, p.offsets = cl, stopPoll, false, off
	p.mu.Unlock()
	defer func() {
		// What is still marked is committed by revoked, which Close runs
		// when it leaves the group; it also stops the workers.
		stopCommits()
		<-committed
		cl.Close()
		ws := p.allWorkers()
		p.seal(ws)
		p.stopAll(ws)
		p.mu.Lock()
		p.cl, p.stopPoll, p.owned, p.offsets = nil, nil, map[int32]struct{}{}, nil
		p.mu.Unlock()
	}()
	p.readyOnce.Do(func() { close(p.ready) })
	for {
		// Checked before polling too: a failure between sessions found no
		// poll to stop.
		if err := p.fatal(); err != nil {
			cl.AllowRebalance()
			return false, fmt.Errorf("processor: %w", err)
		}
		fetches := cl.PollRecords(pollCtx, p.cfg.MaxPollRecords)
		if err := p.fatal(); err != nil {
			cl.AllowRebalance()
			return false, fmt.Errorf("processor: %w", err)
		}
		if fetches.IsClientClosed() || ctx.Err() != nil {
			cl.AllowRebalance()
			return false, nil
		}
		if p.rejoinRequested() {
			cl.AllowRebalance()
			return true, nil
		}
		fetches.EachError(func(t string, part int32, err error) {
			p.log.WarnContext(ctx, "fetch error", slog.String("topic", t), slog.Int("partition", int(part)), slog.String("error", err.Error()))
		})
		fetches.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if len(ftp.Records) == 0 {
				return
			}
			p.mu.Lock()
			w := p.workers[ftp.Partition]
			p.mu.Unlock()
			if w == nil {
				return
			}
			// A worker that stopped (fenced, told to quit) or a shutdown
			// must never leave the poll loop blocked here: that would block
			// the rebalance that stops the workers.
			select {
			case w.recs <- ftp.Records:
			case <-w.quit:
			case <-ctx.Done():
			}
		})
		cl.AllowRebalance()
	}
}

// giveBack is called by a worker that was fenced. If the partition is still
// assigned to it (no revoke took it away first), nobody else will restart
// it: the session ends and the processor joins the group again.
func (p *Processor) giveBack(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.workers[w.part] != w {
		return // revoked or lost already: the new owner has it
	}
	delete(p.workers, w.part)
	p.rejoin = true
	if p.stopPoll != nil {
		p.stopPoll()
	}
	p.log.Warn("partition fenced while still assigned here; leaving and rejoining the group so it resumes under a fresh fence",
		slog.Int("partition", int(w.part)), slog.Int64("generation", w.tok.Generation))
}

func (p *Processor) rejoinRequested() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rejoin
}

// watchPartitions compares the topic's partition count with the fenced one
// every PartitionCheckInterval. Partitions added while processors run (an
// admin tool, an autoscaler, `fence resize -force`) move keys to new
// partitions while their backlog sits on the old ones, and two workers with
// independent fences would handle one resource: the processor stops.
func (p *Processor) watchPartitions(ctx context.Context, admin *kgo.Client) {
	t := time.NewTicker(p.cfg.PartitionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := topic.Partitions(ctx, admin, p.cfg.Topic)
		if err != nil {
			if ctx.Err() == nil {
				p.log.WarnContext(ctx, "read the topic's partition count", slog.String("error", err.Error()))
			}
			continue
		}
		if n != p.partitions {
			err := fmt.Errorf("%w: topic %s has %d partitions now, fence recorded %d", fence.ErrPartitionCountChanged, p.cfg.Topic, n, p.partitions)
			p.countChanged(ctx, err)
			p.setFatal(err)
			return
		}
	}
}

// countChanged says loudly why the processor stops taking work.
func (p *Processor) countChanged(ctx context.Context, err error) {
	p.metrics.countChanged.Set(1)
	p.log.ErrorContext(ctx, "stopping: the topic's partition count differs from the fenced one; stop the relays, let the processors drain, then run `hookyard fence resize` (see the README's \"Resizing the topic\")",
		slog.String("error", err.Error()))
}

// Check is the processor's readiness: an error once it stopped for a
// reason no retry fixes (the partition count changed).
func (p *Processor) Check(context.Context) error { return p.fatal() }

// assigned takes each new partition's fence before its worker starts. The
// take happens here and only here, while the partition is ours for certain:
// a take retried later could bump the generation past a newer owner's. It
// retries until it succeeds; the rebalance waits, since nothing could be
// written without a fence anyway.
func (p *Processor) assigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	for _, part := range assigned[p.cfg.Topic] {
		p.mu.Lock()
		p.owned[part] = struct{}{}
		p.mu.Unlock()
		if int(part) >= p.partitions {
			// The topic grew: this partition did not exist when the fences
			// were counted, and its keys used to live elsewhere.
			err := fmt.Errorf("%w: assigned partition %d of %s, fence recorded %d partitions", fence.ErrPartitionCountChanged, part, p.cfg.Topic, p.partitions)
			p.countChanged(ctx, err)
			p.setFatal(err)
			return
		}
		tok, err := p.takeFence(ctx, part)
		if err != nil {
			p.log.ErrorContext(ctx, "no fence; partition not started", slog.Int("partition", int(part)), slog.String("error", err.Error()))
			continue
		}
		w := &worker{p: p, part: part, tok: tok, recs: make(chan []*kgo.Record, 4),
			quit: make(chan struct{}), done: make(chan struct{})}
		p.mu.Lock()
		w.off = p.offsets
		p.workers[part] = w
		p.mu.Unlock()
		p.metrics.fenceTakes.Inc()
		p.log.InfoContext(ctx, "partition assigned", slog.Int("partition", int(part)), slog.Int64("generation", tok.Generation))
		go w.run(context.WithoutCancel(ctx))
	}
}

func (p *Processor) takeFence(ctx context.Context, part int32) (fence.Token, error) {
	delay := 100 * time.Millisecond
	for {
		tok, err := fence.Take(ctx, p.pool, p.cfg.Topic, part, p.partitions, p.cfg.InstanceID)
		switch {
		case err == nil:
			return tok, nil
		case errors.Is(err, fence.ErrPartitionCountChanged):
			p.countChanged(ctx, err)
			p.setFatal(err)
			return tok, err
		case ctx.Err() != nil:
			return tok, err
		}
		p.log.WarnContext(ctx, "take fence; retrying", slog.Int("partition", int(part)), slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
			return tok, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

func (p *Processor) setFatal(err error) {
	p.fatalOnce.Do(func() {
		p.mu.Lock()
		p.fatalErr = err
		stop := p.stopPoll
		p.mu.Unlock()
		if stop != nil {
			stop()
		}
	})
}

func (p *Processor) fatal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fatalErr
}

// revoked stops the revoked partitions' workers (each finishes the batch
// it is writing, within RevokeGrace), then commits the offsets they handed
// over, before the group may give the partitions to another member. A
// worker still running after that is sealed: nothing it finishes later is
// committed.
func (p *Processor) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	parts := revoked[p.cfg.Topic]
	ws := p.take(parts)
	p.stopAll(ws)
	p.seal(ws)
	if off := p.sessionOffsets(); off != nil {
		off.flush(ctx, parts, true)
	}
}

// lost seals and stops the lost partitions' workers and forgets their
// offsets: the group may have given the partitions to another member
// already, and our membership is gone, so a commit could only fail or
// rewind the new owner.
func (p *Processor) lost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	parts := lost[p.cfg.Topic]
	ws := p.take(parts)
	p.seal(ws)
	p.stopAll(ws)
	if off := p.sessionOffsets(); off != nil {
		off.flush(ctx, parts, false)
	}
}

// seal makes ws hand over no further offsets.
func (p *Processor) seal(ws []*worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range ws {
		w.sealed = true
	}
}

func (p *Processor) sessionOffsets() *offsets {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.offsets
}

// markDone hands the offset of rec, the last record of a batch w wrote, to
// the committer of w's session, unless w was sealed: a revoke seals its
// workers before it returns and the partitions move, and from then on the
// new owner commits; an offset from us could rewind its progress. A batch
// finished while the revoke waits for its worker is still ours and is
// committed by the revoke.
func (p *Processor) markDone(w *worker, rec *kgo.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !w.sealed && w.off != nil {
		w.off.mark(rec)
	}
}

func (p *Processor) take(parts []int32) []*worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*worker
	for _, part := range parts {
		delete(p.owned, part)
		if w := p.workers[part]; w != nil {
			out = append(out, w)
			delete(p.workers, part)
		}
	}
	return out
}

func (p *Processor) allWorkers() []*worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*worker, 0, len(p.workers))
	for part, w := range p.workers {
		out = append(out, w)
		delete(p.workers, part)
	}
	return out
}

// stopAll asks workers to stop after their current batch and waits at most
// RevokeGrace. A worker stuck past that (a hung provider call) is left
// behind: the new owner's fence keeps it from writing.
func (p *Processor) stopAll(ws []*worker) {
	for _, w := range ws {
		w.stopOnce.Do(func() { close(w.quit) })
	}
	deadline := time.NewTimer(p.cfg.RevokeGrace)
	defer deadline.Stop()
	for _, w := range ws {
		select {
		case <-w.done:
		case <-deadline.C:
			p.log.Warn("worker did not stop within grace; leaving it fenced", slog.Int("partition", int(w.part)))
			return
		}
	}
}

func (p *Processor) retryLoop(ctx context.Context) {
	t := time.NewTicker(p.cfg.RetryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := inbox.EnqueueDue(ctx, p.pool, p.cfg.Now(), 500)
		if err != nil {
			if ctx.Err() == nil {
				p.log.WarnContext(ctx, "enqueue due retries", slog.String("error", err.Error()))
			}
			continue
		}
		if n > 0 {
			p.metrics.retriesEnqueued.Add(float64(n))
		}
	}
}

// worker owns one partition while it is assigned.
type worker struct {
	p    *Processor
	part int32
	// off is the committer of the session that started the worker;
	// sealed (guarded by p.mu) says it may hand over no more offsets.
	off      *offsets
	sealed   bool
	tok      fence.Token
	recs     chan []*kgo.Record
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func (w *worker) run(ctx context.Context) {
	defer close(w.done)
	// However the worker ends, quit is closed so the poll loop never waits
	// on it.
	defer w.stopOnce.Do(func() { close(w.quit) })
	for {
		// A revoked worker takes no further batch, even if one is buffered.
		select {
		case <-w.quit:
			return
		default:
		}
		select {
		case <-w.quit:
			return
		case recs := <-w.recs:
			if !w.process(ctx, w.more(recs)) {
				return
			}
		}
	}
}

// more appends the batches already waiting for this worker to recs while
// recs holds fewer than MaxPollRecords (so at most about twice that), so
// that a worker that fell behind catches up with one load, one transaction
// and one offset hand-over instead of one per poll. A worker told to stop
// takes no more.
func (w *worker) more(recs []*kgo.Record) []*kgo.Record {
	for len(recs) < w.p.cfg.MaxPollRecords {
		select {
		case <-w.quit:
			return recs
		default:
		}
		select {
		case next := <-w.recs:
			recs = append(recs, next...)
		default:
			return recs
		}
	}
	return recs
}

// process handles recs until they are written, then commits their offsets.
// It returns false when the worker must stop (fenced, or told to quit).
func (w *worker) process(ctx context.Context, recs []*kgo.Record) bool {
	delay := 100 * time.Millisecond
	for {
		start := time.Now()
		err := w.handle(ctx, recs)
		w.p.metrics.batchSeconds.Observe(time.Since(start).Seconds())
		if err == nil {
			w.p.metrics.records.Add(float64(len(recs)))
			w.commit(recs)
			return true
		}
		if errors.Is(err, fence.ErrFenced) {
			w.fenced(err)
			return false
		}
		if poison(err) {
			return w.isolate(ctx, recs, err)
		}
		w.p.log.Warn("batch failed; retrying", slog.Int("partition", int(w.part)), slog.String("error", err.Error()))
		if !w.sleep(ctx, delay) {
			return false
		}
		delay = min(delay*2, 10*time.Second)
	}
}

// commit hands recs' offsets to the session's committer and returns at
// once. The work is committed in Postgres already; a lost offset commit only
// means a harmless redelivery.
func (w *worker) commit(recs []*kgo.Record) {
	if len(recs) > 0 {
		w.p.markDone(w, recs[len(recs)-1])
	}
}

func (w *worker) fenced(err error) {
	w.p.metrics.fenced.Inc()
	w.p.log.Warn("write refused: partition taken over", slog.Int("partition", int(w.part)),
		slog.Int64("generation", w.tok.Generation), slog.String("error", err.Error()))
	w.p.giveBack(w)
}

// sleep waits d, or returns false when the worker is told to quit.
func (w *worker) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-w.quit:
		return false
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// poison reports whether the database rejected an event's data (a data or
// integrity error), as opposed to being unreachable: retrying the same batch
// would fail forever.
func poison(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")
}

// isolate handles a poisoned batch record by record, so one bad event is
// marked dead instead of blocking its partition.
func (w *worker) isolate(ctx context.Context, recs []*kgo.Record, cause error) bool {
	if len(recs) > 1 {
		w.p.log.Warn("batch rejected by the database; handling its records one by one",
			slog.Int("partition", int(w.part)), slog.Int("records", len(recs)), slog.String("error", cause.Error()))
		for _, r := range recs {
			if !w.process(ctx, []*kgo.Record{r}) {
				return false
			}
		}
		return true
	}
	delay := 100 * time.Millisecond
	for {
		err := w.markDead(ctx, recs[0], cause)
		if err == nil {
			break
		}
		if errors.Is(err, fence.ErrFenced) {
			w.fenced(err)
			return false
		}
		w.p.log.Warn("mark poisoned event dead; retrying", slog.Int("partition", int(w.part)), slog.String("error", err.Error()))
		if !w.sleep(ctx, delay) {
			return false
		}
		delay = min(delay*2, 10*time.Second)
	}
	w.p.metrics.events.WithLabelValues("dead").Inc()
	if m, err := message.Decode(recs[0].Value); err == nil && m.Kind == message.KindEvent {
		w.p.metrics.failures.WithLabelValues(m.Provider, m.EventType).Inc()
	}
	w.commit(recs)
	return true
}

func (w *worker) markDead(ctx context.Context, rec *kgo.Record, cause error) error {
	m, err := message.Decode(rec.Value)
	if err != nil || m.Kind != message.KindEvent {
		return nil // a check or a foreign record: nothing to keep
	}
	return pgx.BeginFunc(ctx, w.p.pool, func(tx pgx.Tx) error {
		if err := fence.Check(ctx, tx, w.tok); err != nil {
			return err
		}
		return inbox.MarkDead(ctx, tx, inbox.Key{Provider: m.Provider, SourceAccount: m.SourceAccount, Environment: m.Environment, EventID: m.EventID},
			"rejected by the database: "+cause.Error())
	})
}
