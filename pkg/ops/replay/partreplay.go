package replay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
)

// ErrInvalid: the request cannot be run as given (a partition out of range,
// both or neither of from-offset and since, ...). The wrapped message says
// which field and why.
var ErrInvalid = errors.New("invalid partition replay")

// ErrUnknownTopic: the topic does not exist on the brokers.
var ErrUnknownTopic = errors.New("unknown topic")

// Why a record was read but not replayed, beside the inbox's reasons
// (inbox.SkipNotInInbox, inbox.SkipIgnored, inbox.SkipBusy).
const (
	// SkipUndecodable: the record is not a message (the processor skips it too).
	SkipUndecodable = "undecodable"
	// SkipDuplicate: the same event, or a check of the same resource, was
	// already replayed from an earlier offset of this run; one replay of it
	// is enough.
	SkipDuplicate = "duplicate"
)

// Defaults of Config.
const (
	BatchSizeDefault   = 500
	BusyRetriesDefault = 5
	BusyWaitDefault    = 200 * time.Millisecond
	IdleTimeoutDefault = 10 * time.Second
)

// Config configures a Replayer.
type Config struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// Topic is the events topic. Required.
	Topic string
	// BatchSize is how many records are re-enqueued per statement. Defaults
	// to BatchSizeDefault.
	BatchSize int
	// BusyRetries is how many times events whose rows were held by another
	// transaction are tried again before they are reported as busy.
	// Defaults to BusyRetriesDefault.
	BusyRetries int
	// BusyWait is the pause before each of those tries. Defaults to
	// BusyWaitDefault.
	BusyWait time.Duration
	// IdleTimeout ends a replay that received no record for this long
	// although it had not reached its end offset (records deleted under it,
	// an unreachable leader). The report then says complete=false and where
	// to resume. Defaults to IdleTimeoutDefault.
	IdleTimeout time.Duration
}

func (c Config) withDefaults() Config {
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.BusyRetries = cmp.Or(c.BusyRetries, BusyRetriesDefault)
	c.BusyWait = cmp.Or(c.BusyWait, BusyWaitDefault)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, IdleTimeoutDefault)
	return c
}

func (c Config) validate() error {
	switch {
	case len(c.Brokers) == 0:
		return errors.New("partreplay: Brokers is required")
	case c.Topic == "":
		return errors.New("partreplay: Topic is required")
	case c.BatchSize < 0:
		return fmt.Errorf("partreplay: BatchSize must be positive, got %d", c.BatchSize)
	}
	return nil
}

// Request says which records of which partition to replay.
type Request struct {
	// Partition of the topic. Required.
	Partition int32
	// FromOffset is the first offset to read. Exactly one of FromOffset and
	// Since is set. An offset below the log start (already deleted by
	// retention) starts at the log start.
	FromOffset *int64
	// Since starts at the first record produced at or after it (the record
	// timestamp, i.e. when the relay published it).
	Since time.Time
	// ToOffset ends the replay before this offset (exclusive). Defaults to
	// the partition's high watermark when the replay starts, so the replay's
	// own records (appended behind it) are never read again.
	ToOffset *int64
	// Limit caps the records read; the report's next_offset says where to
	// resume. Defaults to no limit.
	Limit int
}

func (r Request) validate() error {
	switch {
	case r.Partition < 0:
		return fmt.Errorf("%w: partition must be 0 or more, got %d", ErrInvalid, r.Partition)
	case r.FromOffset == nil && r.Since.IsZero():
		return fmt.Errorf("%w: give a from-offset or a since time", ErrInvalid)
	case r.FromOffset != nil && !r.Since.IsZero():
		return fmt.Errorf("%w: give a from-offset or a since time, not both", ErrInvalid)
	case r.FromOffset != nil && *r.FromOffset < 0:
		return fmt.Errorf("%w: from-offset must be 0 or more, got %d", ErrInvalid, *r.FromOffset)
	case r.ToOffset != nil && *r.ToOffset < 0:
		return fmt.Errorf("%w: to-offset must be 0 or more, got %d", ErrInvalid, *r.ToOffset)
	case r.FromOffset != nil && r.ToOffset != nil && *r.ToOffset <= *r.FromOffset:
		return fmt.Errorf("%w: to-offset (%d, exclusive) must be greater than from-offset (%d)", ErrInvalid, *r.ToOffset, *r.FromOffset)
	case r.Limit < 0:
		return fmt.Errorf("%w: limit must be 0 (none) or more, got %d", ErrInvalid, r.Limit)
	}
	return nil
}

// Report is what a replay did.
type Report struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Partitions int    `json:"partitions"`
	// StartOffset is the first offset read from (from-offset, the offset
	// since resolved to, or the log start when retention deleted more).
	StartOffset int64 `json:"start_offset"`
	// EndOffset is where the replay stops (exclusive): the high watermark
	// at the start, or to-offset when lower.
	EndOffset int64 `json:"end_offset"`
	// NextOffset is where a follow-up replay would resume.
	NextOffset int64 `json:"next_offset"`
	// Complete says every record up to EndOffset was read.
	Complete bool `json:"complete"`
	Read     int  `json:"read"`
	// Replayed counts messages sent back down the path: events re-enqueued
	// and other messages (checks) written again.
	Replayed       int            `json:"replayed"`
	ReplayedEvents int            `json:"replayed_events"`
	ReplayedOther  int            `json:"replayed_other"`
	Skipped        map[string]int `json:"skipped"`
	// Stopped says why a replay ended before EndOffset with no limit
	// reached: "idle" when no record arrived for IdleTimeout.
	Stopped string `json:"stopped,omitempty"`
}

// Replayer replays partitions of one topic.
type Replayer struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	cfg  Config
}

// New returns a Replayer.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config) (*Replayer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Replayer{pool: pool, log: log.With(slog.String("service", "partition-replay")), cfg: cfg.withDefaults()}, nil
}

// Replay runs req. Invalid requests return an error wrapping ErrInvalid
// before anything is read. On a later error the report says how far it got.
func (r *Replayer) Replay(ctx context.Context, req Request) (Report, error) {
	rep := Report{Topic: r.cfg.Topic, Partition: req.Partition, Skipped: map[string]int{}}
	if err := req.validate(); err != nil {
		return rep, err
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(r.cfg.Brokers...))
	if err != nil {
		return rep, fmt.Errorf("kafka client: %w", err)
	}
	defer admCl.Close()
	if err := r.bounds(ctx, kadm.NewClient(admCl), req, &rep); err != nil {
		return rep, err
	}
	rep.NextOffset = rep.StartOffset
	if rep.StartOffset >= rep.EndOffset {
		rep.Complete = true
		r.logReport(ctx, rep)
		return rep, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.cfg.Topic: {req.Partition: kgo.NewOffset().At(rep.StartOffset)}}))
	if err != nil {
		return rep, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	err = r.read(ctx, cl, req, &rep)
	r.logReport(ctx, rep)
	return rep, err
}

// bounds checks the partition and resolves where to start and stop.
func (r *Replayer) bounds(ctx context.Context, adm *kadm.Client, req Request, rep *Report) error {
	ends, err := adm.ListEndOffsets(ctx, r.cfg.Topic)
	if err != nil {
		return fmt.Errorf("list end offsets of %s: %w", r.cfg.Topic, err)
	}
	parts := ends[r.cfg.Topic]
	if len(parts) == 0 {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, r.cfg.Topic)
	}
	if o, ok := parts[-1]; ok && errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("%w: %s", ErrUnknownTopic, r.cfg.Topic)
	}
	rep.Partitions = len(parts)
	end, ok := parts[req.Partition]
	if !ok {
		return fmt.Errorf("%w: partition %d is out of range: topic %s has %d partitions (0-%d)",
			ErrInvalid, req.Partition, r.cfg.Topic, len(parts), len(parts)-1)
	}
	if end.Err != nil {
		return fmt.Errorf("high watermark of %s/%d: %w", r.cfg.Topic, req.Partition, end.Err)
	}
	rep.EndOffset = end.Offset
	if req.ToOffset != nil && *req.ToOffset < rep.EndOffset {
		rep.EndOffset = *req.ToOffset
	}

	starts, err := adm.ListStartOffsets(ctx, r.cfg.Topic)
	if err != nil {
		return fmt.Errorf("list start offsets of %s: %w", r.cfg.Topic, err)
	}
	logStart, ok := starts.Lookup(r.cfg.Topic, req.Partition)
	if !ok {
		return fmt.Errorf("log start offset of %s/%d: not listed", r.cfg.Topic, req.Partition)
	}
	if logStart.Err != nil {
		return fmt.Errorf("log start offset of %s/%d: %w", r.cfg.Topic, req.Partition, logStart.Err)
	}
	if req.FromOffset != nil {
		rep.StartOffset = *req.FromOffset
	} else {
		after, err := adm.ListOffsetsAfterMilli(ctx, req.Since.UnixMilli(), r.cfg.Topic)
		if err != nil {
			return fmt.Errorf("list offsets of %s after %s: %w", r.cfg.Topic, req.Since.Format(time.RFC3339), err)
		}
		o, ok := after.Lookup(r.cfg.Topic, req.Partition)
		if !ok {
			return fmt.Errorf("offset of %s/%d after %s: not listed", r.cfg.Topic, req.Partition, req.Since.Format(time.RFC3339))
		}
		if o.Err != nil {
			return fmt.Errorf("offset of %s/%d after %s: %w", r.cfg.Topic, req.Partition, req.Since.Format(time.RFC3339), o.Err)
		}
		// -1: no record at or after since (the broker answers the end).
		rep.StartOffset = o.Offset
		if o.Offset < 0 {
			rep.StartOffset = end.Offset
		}
	}
	rep.StartOffset = max(rep.StartOffset, logStart.Offset)
	return nil
}

// maxSeen bounds the sets that keep copies of one message from being sent
// back twice in a run.
const maxSeen = 100_000

// pending is one batch of messages to send back.
type pending struct {
	events []inbox.Key
	other  []message.Message
}

func (r *Replayer) read(ctx context.Context, cl *kgo.Client, req Request, rep *Report) error {
	// Copies of one message in the range are sent back once. The sets are
	// bounded: past maxSeen they start over (a second copy is harmless).
	seenEvents := map[inbox.Key]bool{}
	seenOther := map[string]bool{}
	var busy []inbox.Key
	var batch pending
	var batchStart int64
	flush := func() error {
		b, err := r.send(ctx, batch, rep)
		busy = append(busy, b...)
		batch = pending{}
		if err != nil {
			rep.NextOffset = batchStart // resume at the batch that was not written
		}
		return err
	}
	full := func() bool { return req.Limit > 0 && rep.Read >= req.Limit }
	for rep.NextOffset < rep.EndOffset && !full() {
		batchStart = rep.NextOffset
		if len(seenEvents) >= maxSeen {
			clear(seenEvents)
		}
		if len(seenOther) >= maxSeen {
			clear(seenOther)
		}
		pctx, cancel := context.WithTimeout(ctx, r.cfg.IdleTimeout)
		fetches := cl.PollRecords(pctx, r.cfg.BatchSize)
		cancel()
		if ctx.Err() != nil {
			_ = flush()
			return ctx.Err()
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
				ferr = fmt.Errorf("fetch %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			_ = flush()
			return ferr
		}
		recs := fetches.Records()
		if len(recs) == 0 {
			// Nothing for IdleTimeout although records should remain:
			// stop and say where to resume rather than wait forever.
			r.log.WarnContext(ctx, "partition replay idle before its end offset",
				slog.Int64("next_offset", rep.NextOffset), slog.Int64("end_offset", rep.EndOffset))
			rep.Stopped = "idle"
			break
		}
		for _, rec := range recs {
			if rec.Offset < rep.NextOffset {
				continue
			}
			if rec.Offset >= rep.EndOffset {
				// Records come in offset order: nothing is left before the end.
				rep.NextOffset = rep.EndOffset
				break
			}
			if full() {
				break
			}
			rep.Read++
			rep.NextOffset = rec.Offset + 1
			m, err := message.Decode(rec.Value)
			switch {
			case err != nil:
				rep.Skipped[SkipUndecodable]++
			case m.Kind == message.KindEvent:
				k := inbox.Key{Provider: m.Provider, SourceAccount: m.SourceAccount, Environment: m.Environment, EventID: m.EventID}
				if seenEvents[k] {
					rep.Skipped[SkipDuplicate]++
					continue
				}
				seenEvents[k] = true
				batch.events = append(batch.events, k)
			default:
				// Anything else goes back as it is; only its stamp says
				// it is a replay.
				if seenOther[m.Kind+"\x00"+m.Resource.Key()] {
					rep.Skipped[SkipDuplicate]++
					continue
				}
				seenOther[m.Kind+"\x00"+m.Resource.Key()] = true
				m.Reason, m.EnqueuedAt = message.ReasonReplay, time.Now().UTC()
				batch.other = append(batch.other, m)
			}
		}
		if err := flush(); err != nil {
			return err
		}
	}
	for try := 0; len(busy) > 0 && try < r.cfg.BusyRetries; try++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.cfg.BusyWait):
		}
		var err error
		busy, err = r.send(ctx, pending{events: busy}, rep)
		if err != nil {
			return err
		}
	}
	if len(busy) > 0 {
		rep.Skipped[inbox.SkipBusy] += len(busy)
	}
	rep.Complete = rep.NextOffset >= rep.EndOffset
	return nil
}

// send re-enqueues a batch, counts it and returns the events whose rows
// were busy, to be tried again.
func (r *Replayer) send(ctx context.Context, b pending, rep *Report) ([]inbox.Key, error) {
	n, skipped, err := inbox.ReplayEvents(ctx, r.pool, b.events)
	if err != nil {
		return nil, err
	}
	rep.ReplayedEvents += n
	rep.Replayed += n
	var busy []inbox.Key
	for k, why := range skipped {
		if why == inbox.SkipBusy {
			busy = append(busy, k)
			continue
		}
		rep.Skipped[why]++
	}
	m, err := inbox.EnqueueMessages(ctx, r.pool, b.other)
	if err != nil {
		return busy, err
	}
	rep.ReplayedOther += int(m)
	rep.Replayed += int(m)
	return busy, nil
}

func (r *Replayer) logReport(ctx context.Context, rep Report) {
	r.log.InfoContext(ctx, "partition replayed", slog.String("topic", rep.Topic), slog.Int("partition", int(rep.Partition)),
		slog.Int64("start_offset", rep.StartOffset), slog.Int64("end_offset", rep.EndOffset), slog.Int64("next_offset", rep.NextOffset),
		slog.Bool("complete", rep.Complete), slog.Int("read", rep.Read), slog.Int("replayed", rep.Replayed), slog.Any("skipped", rep.Skipped))
}
