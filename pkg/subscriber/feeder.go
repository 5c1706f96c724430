package subscriber

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/message"
)

// Defaults of FeederConfig.
const (
	// GroupDefault is the feeders' consumer group.
	GroupDefault = "hookyard-subscribers"
	// PollRecordsDefault caps the records one transaction records.
	PollRecordsDefault = 500
)

// FeederConfig configures a Feeder.
type FeederConfig struct {
	// Brokers are the Kafka seed brokers. Required.
	Brokers []string
	// Topic is the changes topic. Required.
	Topic string
	// Group is the consumer group. Defaults to GroupDefault.
	Group string
	// Subscribers receive the changes. Required (a feeder without
	// subscribers has nothing to do: do not start one).
	Subscribers Subscribers
	// PollRecords caps the records recorded in one transaction. Defaults
	// to PollRecordsDefault.
	PollRecords int
}

// Feeder records a delivery action per change record and subscriber.
type Feeder struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	cfg  FeederConfig
	read atomic.Int64
}

// NewFeeder builds a Feeder; Run starts it.
func NewFeeder(pool *pgxpool.Pool, log *slog.Logger, cfg FeederConfig) (*Feeder, error) {
	cfg.Group = cmp.Or(cfg.Group, GroupDefault)
	cfg.PollRecords = cmp.Or(cfg.PollRecords, PollRecordsDefault)
	switch {
	case len(cfg.Brokers) == 0 || cfg.Topic == "":
		return nil, errors.New("subscriber feeder: Brokers and Topic are required")
	case len(cfg.Subscribers) == 0:
		return nil, errors.New("subscriber feeder: no subscribers")
	case cfg.PollRecords < 1:
		return nil, errors.New("subscriber feeder: PollRecords must be at least 1")
	}
	if err := cfg.Subscribers.Validate(true); err != nil {
		return nil, fmt.Errorf("subscriber feeder: %w", err)
	}
	return &Feeder{pool: pool, log: log.With(slog.String("service", "subscriber-feeder")), cfg: cfg}, nil
}

// Read is how many change records this feeder has recorded (and
// committed); records of a re-read count again.
func (f *Feeder) Read() int64 { return f.read.Load() }

// Run records the changes topic's records until ctx ends. A group new to
// the topic starts at its beginning: the changes published before the
// first feeder ran are delivered too (for a compacted topic, the current
// state of each resource and what follows).
//
// Offsets are committed only after the records' actions committed. The
// client blocks rebalances while a batch is being recorded
// (BlockRebalanceOnPoll), so a partition moves to another feeder only
// between batches, after the commit: two feeders never record one
// partition's records at once, and the order in which a stream's actions
// are recorded (their order_seq) is the topic's.
func (f *Feeder) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.cfg.Brokers...), kgo.ConsumerGroup(f.cfg.Group), kgo.ConsumeTopics(f.cfg.Topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return fmt.Errorf("subscriber feeder: kafka client: %w", err)
	}
	defer func() {
		// A client that blocks rebalances waits for AllowRebalance before
		// it can leave the group.
		cl.AllowRebalance()
		cl.Close()
	}()
	f.log.InfoContext(ctx, "subscriber feeder", slog.String("topic", f.cfg.Topic), slog.String("group", f.cfg.Group),
		slog.Int("subscribers", len(f.cfg.Subscribers)))
	for {
		fetches := cl.PollRecords(ctx, f.cfg.PollRecords)
		if ctx.Err() != nil {
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			f.log.WarnContext(ctx, "read the changes topic", slog.String("topic", t), slog.Int("partition", int(p)), slog.String("error", err.Error()))
		})
		if recs := fetches.Records(); len(recs) > 0 {
			if !f.recordUntilDone(ctx, recs) {
				return nil
			}
			if err := cl.CommitRecords(ctx, recs...); err != nil && ctx.Err() == nil {
				// Recorded but not committed: the next owner re-reads
				// them, and their actions are there already.
				f.log.WarnContext(ctx, "commit changes-topic offsets", slog.String("error", err.Error()))
			}
		}
		cl.AllowRebalance()
	}
}

// recordUntilDone records recs, retrying with backoff until it commits or
// ctx ends (false). Nothing is skipped: a later record of a stream is never
// recorded (so never delivered) ahead of an earlier one that failed.
func (f *Feeder) recordUntilDone(ctx context.Context, recs []*kgo.Record) bool {
	var backoff time.Duration
	for {
		err := f.record(ctx, recs)
		if err == nil {
			f.read.Add(int64(len(recs)))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
		f.log.WarnContext(ctx, "record subscriber deliveries", slog.Int("records", len(recs)), slog.String("error", err.Error()),
			slog.Duration("backoff", backoff))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
	}
}

// record records every delivery recs ask for, in one transaction, in the
// records' order. A record that is not a change is reported and skipped: it
// cannot become one by being read again.
func (f *Feeder) record(ctx context.Context, recs []*kgo.Record) error {
	b := &pgx.Batch{}
	for _, r := range recs {
		c, err := message.DecodeChange(r.Value)
		if err != nil {
			f.log.WarnContext(ctx, "not a change record; no delivery", slog.Int("partition", int(r.Partition)),
				slog.Int64("offset", r.Offset), slog.String("error", err.Error()))
			continue
		}
		for _, s := range f.cfg.Subscribers {
			if s.Takes(c) {
				action.QueueOrderedRecord(b, s.Record(c, r.Value))
			}
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("record deliveries: %w", err)
		}
		return nil
	})
}
