package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/fence"
	"github.com/hookyard/hookyard/pkg/outbox"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/topic"
)

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
	// stateKeeper keeps a state's projection.state_fields (keepState).
	stateKeeper provider.Keeper
	// changes wakes the relays after a commit that wrote change records
	// (package outbox): those never notify from their transaction.
	changes *outbox.Notifier
	// owning is what Check reports: true once the current session's
	// assignment is owned (fences taken, workers started, or nothing to
	// own); waiting says what the processor waits for until then.
	owning  bool
	waiting string
}

// ErrNotReady is Check's answer while the processor waits for its brokers,
// its topic or its share of the group's partitions.
var ErrNotReady = errors.New("processor not ready")

// New builds a processor; Run starts it.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config) (*Processor, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Processor{pool: pool, log: log.With(slog.String("service", "processor"), slog.String("instance", cfg.InstanceID)),
		cfg: cfg, metrics: newMetrics(cfg.Registerer), endpoints: map[string]*provider.Endpoint{},
		workers: map[int32]*worker{}, owned: map[int32]struct{}{}, ready: make(chan struct{})}
	p.changes = outbox.NewNotifier(pool, p.log)
	p.stateKeeper = provider.NewKeeper(cfg.StateFields)
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
	p.setWaiting("brokers and topic " + p.cfg.Topic)
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
	go p.changes.Run(ctx)
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
	var n int
	err := topic.Await(ctx, p.cfg.TopicWait, func(ctx context.Context) (err error) {
		n, err = topic.Partitions(ctx, admin, p.cfg.Topic)
		return err
	}, func(err error, left time.Duration) {
		p.log.WarnContext(ctx, "not ready: waiting for the brokers to answer and the topic to exist", slog.String("topic", p.cfg.Topic),
			slog.Duration("up_to", left), slog.String("error", err.Error()))
	})
	return n, err
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

// Check is the processor's readiness. It answers ErrNotReady while the
// processor waits for its brokers and topic or for the group to assign it
// its partitions, and the fatal error once it stopped for a reason no retry
// fixes (the partition count changed). A processor that answered 200 while
// it waited would count as capacity that handles nothing.
func (p *Processor) Check(context.Context) error {
	if err := p.fatal(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.owning {
		return fmt.Errorf("%w: waiting for %s", ErrNotReady, p.waiting)
	}
	return nil
}

// setWaiting makes Check report what the processor waits for.
func (p *Processor) setWaiting(what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.owning, p.waiting = false, what
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
