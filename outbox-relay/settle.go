package outboxrelay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
INSERT INTO outbox (id, message_key, message, created_at, topic)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[], $5::text[])`, back.ids, back.keys, back.msgs, back.created, back.topics); err != nil {
			return 0, 0, err
		}
	}
	if len(gone.ids) > 0 {
		if _, err := b.conn.Exec(ctx, `
INSERT INTO outbox_dead (id, message_key, message, created_at, error, topic)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::text[])
-- Moved here before and copied back without a DELETE: refused again, it
-- updates its dead row; a duplicate key would fail the whole batch forever.
ON CONFLICT (id) DO UPDATE SET message_key = EXCLUDED.message_key, message = EXCLUDED.message,
    created_at = EXCLUDED.created_at, error = EXCLUDED.error, topic = EXCLUDED.topic, failed_at = now()`,
			gone.ids, gone.keys, gone.msgs, gone.created, gone.errs, gone.topics); err != nil {
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
	topics           []*string // nil: the events topic
}

func (s *rowSet) add(b *batch, i int, errText string) {
	s.ids = append(s.ids, b.ids[i])
	s.keys = append(s.keys, string(b.recs[i].Key))
	s.msgs = append(s.msgs, string(b.recs[i].Value))
	s.created = append(s.created, b.created[i])
	s.errs = append(s.errs, errText)
	s.topics = append(s.topics, b.topics[i])
}

// kafkaPublisher produces through a franz-go client. The client keeps the
// order of Produce calls per partition, and its idempotent producer keeps it
// across retries.
type kafkaPublisher struct{ cl *kgo.Client }

func (p kafkaPublisher) Publish(ctx context.Context, r *kgo.Record, done func(*kgo.Record, error)) {
	p.cl.Produce(ctx, r, done)
}
