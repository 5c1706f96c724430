package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/fence"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
)

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

// poisonClasses are the SQLSTATE classes of errors an event's own data
// causes, which every retry of the same batch meets again: 22 data
// exception (a value the database refuses, e.g. a NUL in jsonb), 23
// integrity constraint violation, 54 program limit exceeded (e.g. 54000, an
// index row too large). Everything else (connection, lock timeout,
// serialization, shutdown) may pass and is retried.
var poisonClasses = []string{"22", "23", "54"}

// poison reports whether the database rejected an event's data, as opposed
// to being unreachable or busy: retrying the same batch would fail forever.
func poison(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return slices.ContainsFunc(poisonClasses, func(c string) bool { return strings.HasPrefix(pgErr.Code, c) })
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
		w.p.metrics.failures.WithLabelValues(w.p.failureLabels(m, m.EventType)...).Inc()
	}
	w.commit(recs)
	return true
}

// markDead keeps rec's event dead with cause and parks the projection it
// was about, where one exists: its change never landed, so the projection
// may be behind the provider.
func (w *worker) markDead(ctx context.Context, rec *kgo.Record, cause error) error {
	m, err := message.Decode(rec.Value)
	if err != nil || m.Kind != message.KindEvent {
		return nil // a check or a foreign record: nothing to keep
	}
	reason := "rejected by the database: " + cause.Error()
	return pgx.BeginFunc(ctx, w.p.pool, func(tx pgx.Tx) error {
		if err := fence.Check(ctx, tx, w.tok); err != nil {
			return err
		}
		if err := inbox.MarkDead(ctx, tx, inbox.Key{Provider: m.Provider, SourceAccount: m.SourceAccount, Environment: m.Environment, EventID: m.EventID},
			reason); err != nil {
			return fmt.Errorf("mark event dead: %w", err)
		}
		b := &pgx.Batch{}
		projection.QueueNeedsReconcile(b, []projection.Parking{{Resource: m.Resource, Reason: deadReason(m.EventID, reason)}})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("park the projection of a dead event: %w", err)
		}
		return nil
	})
}
